import { describe, expect, it } from 'vitest';
import { wrapperStartBound } from '../../host/sandbox/exec-outcome';

/** The clocks as the kernel shows them: start time and uptime floored to 10 ms ticks. */
const clocksAt = (nowS: number, perfOffsetMs: number) => ({ perf: () => nowS * 1000 + perfOffsetMs, uptimeS: () => Math.floor(nowS * 100) / 100 });
const rootAt = (startS: number) => `42:${Math.floor(startS * 100)}`;

describe('the start of a command for the disk guard', () => {
  it('is the wrapper kernel start time on the performance clock, a tick early at most two', () => {
    const bound = wrapperStartBound(rootAt(50), clocksAt(50.3, 7_000))!;
    // Started at 50.00 s, now 50.30 s: 310 ms back from the performance clock's 57,300 ms.
    expect(bound).toBeCloseTo(50_300 + 7_000 - 310, 6);
  });

  it('is never later than the true start, whatever falls between the ticks', () => {
    for (let i = 0; i < 5_000; i++) {
      const start = 1 + Math.random() * 10_000;
      const now = start + Math.random() * 2;
      const offset = Math.random() * 1e6 - 5e5;
      const bound = wrapperStartBound(rootAt(start), clocksAt(now, offset));
      expect(bound, `start ${start} now ${now}`).toBeLessThanOrEqual(start * 1000 + offset + 1e-6);
      // ...and by no more than two ticks.
      expect(bound!).toBeGreaterThanOrEqual(start * 1000 + offset - 20 - 1e-6);
    }
  });

  it('is unknown for a wrapper that never spoke, a garbled line, an unreadable uptime or a start after now (another machine)', () => {
    const clocks = clocksAt(10, 0);
    expect(wrapperStartBound(undefined, clocks)).toBeUndefined();
    expect(wrapperStartBound('42', clocks)).toBeUndefined();
    expect(wrapperStartBound('42:x', clocks)).toBeUndefined();
    expect(wrapperStartBound('42:0', clocks)).toBeUndefined();
    expect(wrapperStartBound(rootAt(5), { perf: () => 0, uptimeS: () => Number.NaN })).toBeUndefined();
    expect(wrapperStartBound(rootAt(60), clocks)).toBeUndefined();
  });
});
