import { describe, expect, it } from 'vitest';
import { emitWithList } from '../../host/cli/output';

const written = (value: Record<string, unknown> & { steps: unknown[] }) => {
  const parts: string[] = [];
  emitWithList(true, value, 'steps', () => 'human', (s) => parts.push(s));
  return parts;
};

describe('a --json summary with a long list, written in batches', () => {
  it('writes the same bytes as JSON.stringify of the whole value on one line, whatever the list and the values around it hold', () => {
    const tricky = 'a "quote", a newline\n  "steps": 0 and a tab\t';
    const values: Array<Record<string, unknown> & { steps: unknown[] }> = [
      { run: { id: 'run_1', meta: { steps: 0, nested: { steps: [1, 2] } } }, reason: tricky, steps: [{ step: 'one', exitCode: 0 }], acceptance: { state: 'none' } },
      { steps: Array.from({ length: 250 }, (_, i) => ({ step: `s${i}`, outcome: i % 7 ? 'succeeded' : undefined, tail: i % 3 ? tricky : '', deep: { a: [i, { b: null }], e: [] } })), after: 1 },
      { first: [], steps: [null, 'text', 3, [1, [2]], {}, undefined], last: { steps: 'x' } },
      { before: { steps: 0, list: [{ steps: 0 }] }, note: '"steps":0', steps: [1, 2] },
      { run: null, steps: [] },
    ];
    for (const v of values) expect(written(v).join('')).toBe(`${JSON.stringify(v)}\n`);
  });

  it('writes a 3,000-element list a hundred elements at a time, never the whole text at once', () => {
    const steps = Array.from({ length: 3000 }, (_, i) => ({ step: `s${i}`, stdoutTail: `${i}\n` }));
    const parts = written({ run: { id: 'run_1' }, steps });
    const whole = `${JSON.stringify({ run: { id: 'run_1' }, steps })}\n`;
    expect(parts.join('')).toBe(whole);
    expect(parts).toHaveLength(32);
    expect(Math.max(...parts.map((p) => p.length))).toBeLessThan(whole.length / 20);
  });

  it('prints the human text without --json', () => {
    const parts: string[] = [];
    emitWithList(false, { steps: [1] }, 'steps', () => 'STEP  RESULT', (s) => parts.push(s));
    expect(parts).toEqual(['STEP  RESULT\n']);
  });
});
