import { describe, expect, it } from 'vitest';
import { RepeatCollapser } from '../../host/api/log-repeats';

function collapser(windowMs = 30_000) {
  let now = 0;
  const out: string[] = [];
  const c = new RepeatCollapser((t) => out.push(t), () => now, windowMs);
  return { c, out, at: (ms: number) => (now = ms) };
}

describe('the console folds a log line it just showed', () => {
  it('prints the first of a kind, counts the same line within the window, and prints it again after the window with the count', () => {
    const { c, out, at } = collapser();
    for (let i = 0; i < 20; i++) {
      at(i * 250);
      c.line('berth: warning: could not read the run\n');
    }
    expect(out).toEqual(['berth: warning: could not read the run\n']);
    at(31_000);
    c.line('berth: warning: could not read the run\n');
    expect(out).toEqual(['berth: warning: could not read the run\n', 'berth: warning: could not read the run [19 more times in the last 31 s]\n']);
  });

  it('keeps different lines apart, interleaved as pollers print them', () => {
    const { c, out, at } = collapser();
    for (let i = 0; i < 6; i++) {
      at(i * 100);
      c.line('a\n');
      c.line('b\n');
    }
    expect(out).toEqual(['a\n', 'b\n']);
  });

  it('says at exit how often each folded line came, once, and nothing for a line that did not repeat', () => {
    const { c, out, at } = collapser();
    c.line('a\n');
    c.line('b\n');
    at(2_000);
    c.line('a\n');
    c.line('a\n');
    at(5_000);
    c.flush();
    c.flush();
    expect(out).toEqual(['a\n', 'b\n', 'a [2 more times in the last 5 s]\n']);
  });

  it('says the count of a folded line before forgetting it when too many kinds came', () => {
    const { c, out } = collapser();
    c.line('first\n');
    c.line('first\n');
    for (let i = 0; i < 256; i++) c.line(`other ${i}\n`);
    expect(out).toContain('first [1 more time in the last 1 s]\n');
    // Forgotten: it is a new line again.
    c.line('first\n');
    expect(out.at(-1)).toBe('first\n');
  });
});
