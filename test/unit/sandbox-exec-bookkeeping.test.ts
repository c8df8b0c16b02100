import { describe, expect, it } from 'vitest';
import { ExecActivity, FORGET_BATCH } from '../../host/sandbox/exec-activity';
import { WrapperLine } from '../../host/sandbox/wrapper-line';

function line(chunks: string[]) {
  const out: string[] = [];
  const w = new WrapperLine('berth-exec', (c) => out.push(c.toString()));
  for (const c of chunks) w.push(Buffer.from(c));
  w.end();
  return { root: w.root, out: out.join('') };
}

describe('the wrapper line', () => {
  it('takes the wrapper line off the output, split over chunks, and names the root', async () => {
    const { root, out } = line(['berth-e', 'xec 42 1234', '5\nhello', ' world\n']);
    expect(await root).toBe('42:12345');
    expect(out).toBe('hello world\n');
  });

  it('passes everything through when the first line is not the wrapper\'s, or there is none', async () => {
    const forged = line(['hello\nberth-exec 1 1\n']);
    expect(await forged.root).toBeUndefined();
    expect(forged.out).toBe('hello\nberth-exec 1 1\n');
    const partial = line(['berth-exec 4']);
    expect(await partial.root).toBeUndefined();
    expect(partial.out).toBe('berth-exec 4');
    const long = line(['x'.repeat(300)]);
    expect(await long.root).toBeUndefined();
    expect(long.out).toHaveLength(300);
  });
});

describe('the commands of a lease', () => {
  it('owes no sweep to a command that ran alone and ended well', () => {
    const a = new ExecActivity();
    expect(a.end(a.start(), false)).toBe(false);
  });

  it('has the host sweep once the last of two overlapping commands ends, not before', () => {
    const a = new ExecActivity();
    const one = a.start();
    const two = a.start();
    expect(a.end(one, false)).toBe(false);
    expect(a.end(two, false)).toBe(true);
    // Ending twice changes nothing, and the debt is paid.
    expect(a.end(two, true)).toBe(false);
    expect(a.end(a.start(), false)).toBe(false);
  });

  it('has a failed command swept at once when alone, and later when others run', () => {
    const a = new ExecActivity();
    expect(a.end(a.start(), true)).toBe(true);
    const long = a.start();
    expect(a.end(a.start(), true)).toBe(false);
    expect(a.end(long, false)).toBe(true);
  });

  it('hands acknowledged exec ids to one wrapper at a time and takes them back when it never started', () => {
    const a = new ExecActivity();
    a.acknowledge('a');
    a.acknowledge('b');
    const ids = a.takeAcknowledged();
    expect(ids).toEqual(['a', 'b']);
    expect(a.takeAcknowledged()).toEqual([]);
    a.returnAcknowledged(ids);
    expect(a.takeAcknowledged()).toEqual(['a', 'b']);
  });

  it('has the marked exec ids removed once a batch has piled up, and takes a removal back when its wrapper never started', () => {
    const a = new ExecActivity();
    const ids = Array.from({ length: FORGET_BATCH + 1 }, (_, i) => `e${i}`);
    for (const id of ids.slice(0, FORGET_BATCH)) {
      a.acknowledge(id);
      expect(a.takeAcknowledged()).toEqual([id]);
    }
    a.acknowledge(ids[FORGET_BATCH]!);
    const handed = a.takeAcknowledged();
    expect(handed).toEqual([ids[FORGET_BATCH], ...ids.slice(0, FORGET_BATCH).map((id) => `-${id}`)]);
    a.returnAcknowledged(handed);
    expect(a.takeAcknowledged()).toEqual(handed);
    expect(a.takeAcknowledged()).toEqual([]);
  });
});
