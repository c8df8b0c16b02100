import { describe, expect, it } from 'vitest';
import { capLines, LineCap, LiveLineCap } from '../../host/cli/output';
import { toolResultLine } from '../../host/cli/commands/agent-output';

describe('output lines are shown bounded, whatever their shape', () => {
  it('a line longer than the cap, arriving in many chunks, shows its head and counts every character cut', () => {
    const cap = new LineCap(10);
    const shown: string[] = [];
    for (let i = 0; i < 1000; i++) shown.push(...cap.push('abcdefg'));
    shown.push(...cap.push('xyz\nshort\n'));
    expect(shown).toEqual([`abcdefgabc… [${7000 + 3 - 10} characters cut]`, 'short']);
    expect(cap.end()).toBeUndefined();
  });

  it('lines within the cap are kept exactly, and an unfinished last line comes out at the end', () => {
    const cap = new LineCap(10);
    expect([...cap.push('one\ntw'), ...cap.push('o\n\nthr')]).toEqual(['one', 'two', '']);
    expect(cap.end()).toBe('thr');
    expect(capLines('a\nb\n')).toEqual(['a', 'b']);
  });

  it('a cut never falls inside a surrogate pair', () => {
    const [line] = capLines('ab😀cd', 3);
    expect(line).toBe('ab… [4 characters cut]');
  });

  it('streamed text passes through up to the cap per line, and the count is written where the line ends', () => {
    const live = new LiveLineCap(4);
    const out = live.pass('abc') + live.pass('defg\nhi') + live.pass('jklmn') + live.end();
    expect(out).toBe('abcd… [3 characters cut]\nhijk… [3 characters cut]');
  });

  it('a tool result of 192 KiB of spaces is shown as one short line at once (the whitespace pattern ran over all of it: 30 s)', () => {
    const started = Date.now();
    const line = toolResultLine({ status: 'ok', isError: false, name: 'exec', toolCallId: 'c1', content: `exit code 0\n--- stdout ---\na${' '.repeat(192 << 10)}b` });
    // Microseconds when only a bounded head is looked at; the old pass was quadratic in the whole text.
    expect(Date.now() - started).toBeLessThan(2000);
    expect(line.length).toBeLessThan(400);
    expect(line).toMatch(/^ {2}✔ exec \[c1\] exit code 0 ⏎ --- stdout --- ⏎ /);
  });
});
