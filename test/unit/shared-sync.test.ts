import { describe, expect, it } from 'vitest';
import { SharedSync } from '../../host/store/sqlite/shared-sync';

/** A flush the test finishes by hand (pure logic: no disk). */
function manualFlush() {
  const started: Array<{ done(): void; fail(err: unknown): void }> = [];
  const flush = () => new Promise<void>((done, fail) => started.push({ done, fail }));
  return { started, flush };
}
const turn = () => new Promise((r) => setImmediate(r));

describe('shared flush', () => {
  it('answers every caller of one turn after one flush, and none before it completes', async () => {
    const f = manualFlush();
    const s = new SharedSync(f.flush);
    let answered = 0;
    const all = [s.after(), s.after(), s.after()].map((p) => p.then(() => answered++));
    await turn();
    expect(f.started).toHaveLength(1);
    for (let i = 0; i < 3; i++) await turn();
    expect(answered).toBe(0);
    f.started[0]!.done();
    await Promise.all(all);
    expect(answered).toBe(3);
    expect(s.flushes).toBe(1);
  });

  it('makes a caller that asks while a flush runs wait for the next flush, which began after its write', async () => {
    const f = manualFlush();
    const s = new SharedSync(f.flush);
    const order: string[] = [];
    const first = s.after().then(() => order.push('first'));
    await turn();
    const second = s.after().then(() => order.push('second'));
    f.started[0]!.done();
    await first;
    await turn();
    expect(order).toEqual(['first']);
    expect(f.started).toHaveLength(2);
    f.started[1]!.done();
    await second;
    expect(order).toEqual(['first', 'second']);
  });

  it('fails the callers of a failed flush and flushes the next callers afresh', async () => {
    const f = manualFlush();
    const s = new SharedSync(f.flush);
    const a = s.after();
    await turn();
    f.started[0]!.fail(new Error('EIO'));
    await expect(a).rejects.toThrow('EIO');
    const b = s.after();
    await turn();
    f.started[1]!.done();
    await expect(b).resolves.toBeUndefined();
  });

  it('flushes on the event loop\'s thread while flushes are fast, goes to the pool after a slow one, and comes back once the pool\'s are fast again', async () => {
    const f = manualFlush();
    let now = 0;
    const spin = (ms: number) => {
      const until = performance.now() + ms;
      while (performance.now() < until);
    };
    const s = new SharedSync(f.flush, () => spin(now));
    await s.after();
    expect([s.inline, f.started.length]).toEqual([1, 0]);
    // A flush of 10 ms on this thread: the next goes to the pool.
    now = 10;
    await s.after();
    expect([s.inline, f.started.length]).toEqual([2, 0]);
    const first = s.after();
    await turn();
    expect(f.started).toHaveLength(1);
    f.started[0]!.done();
    await first;
    // Fast pool flushes bring the average under the line again (each answered at once here).
    let pooled = 1;
    for (;;) {
      const p = s.after();
      await turn();
      if (s.inline === 3) break;
      expect(pooled, 'the pool\'s fast flushes never brought it back').toBeLessThan(20);
      f.started[pooled++]!.done();
      await p;
    }
    expect(pooled, 'a pool flush at least once more after the slow one').toBeGreaterThan(1);
    expect(s.flushes).toBe(3 + pooled);
  });

  it('fails the callers of a failed flush on this thread, and flushes the next callers afresh', async () => {
    let fail = true;
    const s = new SharedSync(async () => {}, () => {
      if (fail) throw new Error('EIO');
    });
    await expect(s.after()).rejects.toThrow('EIO');
    fail = false;
    await expect(s.after()).resolves.toBeUndefined();
  });
});
