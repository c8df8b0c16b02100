import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { DiskGuard } from '../../host/sandbox/disk-guard';
import { DiskWatch } from '../../host/sandbox/disk-watch';
import type { KillReason, RunningExec } from '../../host/sandbox/exec-run';

/** A guard whose measurements the test answers by hand, recording the freshness each asked for. */
function handGuard() {
  const asked: { freshAfter: number | undefined; answer: (bytes: number) => void }[] = [];
  const guard = {
    limitBytes: 100,
    lastMeasuredBytes: 0,
    nextIntervalMs: () => 1,
    measure: (freshAfter?: number) => new Promise<number>((resolve) => asked.push({ freshAfter, answer: resolve })),
  } as unknown as DiskGuard;
  return { guard, asked };
}

function run(startedAt: number, diskAtStart = 0) {
  const kills: KillReason[] = [];
  const r: RunningExec = { startedAt, diskAtStart, kill: (why) => void kills.push(why) };
  return { r, kills };
}

const until = async (cond: () => boolean) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((res) => setTimeout(res, 5));
  expect(cond()).toBe(true);
};

describe('disk watch', () => {
  it('judges running commands only by a measurement begun after the latest of them started, and kills none that started after it', async () => {
    const { guard, asked } = handGuard();
    const watch = new DiskWatch(guard, pino({ level: 'silent' }));
    const a = run(1_000);
    const b = run(2_000);
    watch.track(a.r);
    watch.track(b.r);
    await until(() => asked.length === 1);
    // A walk that began before b started says nothing of what b did (an `rm` freeing the space).
    expect(asked[0]!.freshAfter).toBe(2_000);
    // A command that starts while the walk runs is not judged by it.
    const c = run(3_000);
    watch.track(c.r);
    asked[0]!.answer(500);
    await until(() => a.kills.length === 1);
    expect([a.kills, b.kills, c.kills]).toEqual([['disk'], ['disk'], []]);
    watch.stop();
  });

  it('kills nothing while the layer is within the limit', async () => {
    const { guard, asked } = handGuard();
    const watch = new DiskWatch(guard, pino({ level: 'silent' }));
    const a = run(1_000);
    watch.track(a.r);
    await until(() => asked.length === 1);
    asked[0]!.answer(50);
    await until(() => asked.length === 2);
    expect(a.kills).toEqual([]);
    watch.stop();
  });

  it('spares a command that started in a layer already over the limit until the layer grows past what it started with', async () => {
    const { guard, asked } = handGuard();
    const watch = new DiskWatch(guard, pino({ level: 'silent' }));
    // An `rm` started after a writer was killed at 130 bytes of a 100-byte limit.
    const rm = run(1_000, 130);
    watch.track(rm.r);
    await until(() => asked.length === 1);
    // The walk saw the layer before the rm's deletions: still full, but no fuller.
    asked[0]!.answer(130);
    await until(() => asked.length === 2);
    expect(rm.kills).toEqual([]);
    // It writes instead: past what it started with, it is killed like any writer.
    asked[1]!.answer(131);
    await until(() => rm.kills.length === 1);
    expect(rm.kills).toEqual(['disk']);
    watch.stop();
  });
});
