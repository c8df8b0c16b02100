import { describe, expect, it } from 'vitest';
import { TaskInputs } from '../../host/store/task-inputs';

const rows = (...ids: string[]) => ids.map((id) => ({ id, input_json: null as string | null }));

describe('the cache of large task inputs', () => {
  it('reads a left-out input once, in one fetch for every row missing it, and answers later reads from the cache', () => {
    const inputs = new TaskInputs(1000);
    const fetched: string[][] = [];
    const fetch = (ids: string[]) => (fetched.push(ids), ids.map((id) => ({ id, input_json: `"${id}-text"` })));
    expect(inputs.fill(rows('a', 'b', 'a'), fetch).map((r) => r.input_json)).toEqual(['"a-text"', '"b-text"', '"a-text"']);
    expect(inputs.fill(rows('b', 'a'), fetch).map((r) => r.input_json)).toEqual(['"b-text"', '"a-text"']);
    expect(fetched).toEqual([['a', 'b', 'a']]);
  });

  it('leaves rows that carry their input as they are and fetches nothing', () => {
    const inputs = new TaskInputs();
    const r = [{ id: 'x', input_json: '{"small":true}' }];
    expect(inputs.fill(r, () => { throw new Error('no fetch expected'); })).toEqual([{ id: 'x', input_json: '{"small":true}' }]);
  });

  it('keeps at most its bound of characters, least recently used out first, and never keeps one input larger than the bound', () => {
    const inputs = new TaskInputs(10);
    let fetches = 0;
    const fetch = (ids: string[]) => (fetches++, ids.map((id) => ({ id, input_json: id === 'huge' ? 'x'.repeat(11) : id.repeat(4) })));
    inputs.fill(rows('a'), fetch); // 4 chars
    inputs.fill(rows('b'), fetch); // 8
    inputs.fill(rows('a'), fetch); // a used last
    inputs.fill(rows('c'), fetch); // 12 > 10: b goes
    expect(fetches).toBe(3);
    inputs.fill(rows('a'), fetch);
    inputs.fill(rows('c'), fetch);
    expect(fetches).toBe(3);
    inputs.fill(rows('b'), fetch);
    expect(fetches).toBe(4);
    inputs.fill(rows('huge'), fetch);
    inputs.fill(rows('huge'), fetch);
    expect(fetches).toBe(6);
  });

  it('refuses a row whose input cannot be read back, naming the task', async () => {
    const inputs = new TaskInputs();
    expect(() => inputs.fill(rows('gone'), () => [])).toThrow(/task gone: its input could not be read back/);
    await expect(inputs.fillAsync(rows('gone'), async () => [])).rejects.toThrow(/task gone/);
  });
});
