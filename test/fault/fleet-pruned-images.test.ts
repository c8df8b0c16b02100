import { afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 120_000);

const present = (f: NonNullable<typeof fx>, snapshotId: string) =>
  f.docker.getImage(`berth-snapshot:${snapshotId}`).inspect().then(
    () => true,
    () => false,
  );

describe('gc on an engine whose snapshot images another host pruned', { timeout: 300_000 }, () => {
  it('berth gc removes the images of snapshots whose records were pruned by a host on another engine (a run that moved away, or restored here), at once, whatever their age; the images of unpruned records stay', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'two', run: 'echo two >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const live = await fx.read(async (s) => (await s.listSnapshots({ runId })).filter((x) => x.prunedAt === null).sort((a, b) => a.commitSeq - b.commitSeq));
    expect(live.length).toBeGreaterThanOrEqual(2);
    const older = live.slice(0, -1);
    const newest = live.at(-1)!;
    // Every image is on the engine (the run's end loads a snapshot kept in the store as a layer).
    for (const s of live) expect(await present(fx, s.id), `image of ${s.id}`).toBe(true);
    // What retention on another engine leaves here: the records pruned there, the images still on this engine.
    await fx.read(async (s) => {
      for (const x of older) await s.markSnapshotPruned(x.id, Date.now());
    });
    const gc = await fx.cli(['gc', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    const report = lastJson<{ unrecordedImages: Array<{ snapshotId: string }> }>(gc);
    for (const s of older) {
      expect(await present(fx, s.id), `image of pruned ${s.id}`).toBe(false);
      expect(report.unrecordedImages.map((x) => x.snapshotId)).toContain(s.id);
    }
    expect(await present(fx, newest.id)).toBe(true);
  });
});
