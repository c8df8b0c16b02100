import { describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';

const STEPS = [
  // Over the 1 MiB a snapshot may write as a layer on the host: step one's snapshot is a docker commit.
  { name: 'one', run: 'head -c 2000000 /dev/urandom > one.bin' },
  { name: 'two', run: 'head -c 1000 /dev/urandom > two.bin' },
];

/** Snapshot tags on the engine for this host, and which of them the store records. */
async function snapshotTags(fx: Awaited<ReturnType<typeof planFixture>>) {
  const images = await fx.docker.listImages({ filters: { label: [`berth.host=${fx.hostId}`, 'berth.snapshot'] } });
  const tags = images.flatMap((i) => (i.RepoTags ?? []).filter((t) => t.startsWith('berth-snapshot:')).map((t) => t.slice('berth-snapshot:'.length)));
  const recorded = new Set(await fx.read(async (s) => (await s.listSnapshots({})).map((r) => r.id)));
  return { all: tags.sort(), unrecorded: tags.filter((t) => !recorded.has(t)).sort() };
}

describe('snapshot images left by a kill during a snapshot', () => {
  it('berth gc removes the image no record names once the run is finished, says how many bytes it freed, and refuses --keep 0 while the run is unfinished', { timeout: 600_000 }, async () => {
    const fx = await planFixture(STEPS);
    try {
      // Killed after step one's snapshot image was committed, before the record that names it.
      const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#1' });
      expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
      const left = await snapshotTags(fx);
      expect(left.unrecorded.length, 'the kill left an image no record names').toBeGreaterThanOrEqual(1);

      const refused = await fx.cli(['gc', '--keep', '0', '--json']);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/gc_refused|only restore points/);
      // Nothing was removed while the run is unfinished.
      expect((await snapshotTags(fx)).all).toEqual(expect.arrayContaining(left.all));

      const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
      const resumed = await fx.cli(['resume', runId, '--json']);
      expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
      expect((await snapshotTags(fx)).unrecorded).toEqual(expect.arrayContaining(left.unrecorded));

      const gc = await fx.cli(['gc', '--grace', '0', '--json']);
      expect(gc.code, gc.stderr.slice(-500)).toBe(0);
      const out = lastJson<{ unrecordedImages: Array<{ snapshotId: string; outcome: string; bytes: number }>; reclaimedBytes: number }>(gc);
      expect(out.unrecordedImages.map((o) => o.snapshotId).sort()).toEqual(left.unrecorded);
      expect(out.reclaimedBytes).toBeGreaterThanOrEqual(2_000_000);
      expect((await snapshotTags(fx)).unrecorded, 'every snapshot image left is recorded').toEqual([]);
    } finally {
      await fx.cleanup();
    }
  });

  it('a kill right after a small snapshot leaves its layer in the store (or its image, if the engine loaded it first); the resumed run loads what its records name, and gc removes the rest', { timeout: 600_000 }, async () => {
    const fx = await planFixture([{ name: 'one', run: 'echo one > one.txt' }, { name: 'two', run: 'echo two > two.txt' }]);
    try {
      const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#1' });
      expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
      const layers = async () => {
        const recorded = new Set(await fx.read(async (s) => (await s.listSnapshots({})).map((r) => r.imageId)));
        const pending = await fx.read((s) => s.listSnapshotDeltas());
        return { recorded: pending.filter((d) => recorded.has(d.imageId)).length, unrecorded: pending.filter((d) => !recorded.has(d.imageId)).map((d) => d.snapshotId) };
      };
      const left = await layers();
      const tags = await snapshotTags(fx);
      expect(left.unrecorded.length + tags.unrecorded.length, 'the kill left a layer or an image no record names').toBeGreaterThanOrEqual(1);

      const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
      const resumed = await fx.cli(['resume', runId, '--json']);
      expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
      expect((await layers()).recorded, 'every recorded snapshot of the finished run is on the engine').toBe(0);
      for (const s of await fx.read((st) => st.listSnapshots({ runId }))) {
        expect(await fx.docker.getImage(s.imageId).inspect().then(() => true, () => false), s.id).toBe(true);
      }

      const gc = await fx.cli(['gc', '--grace', '0', '--json']);
      expect(gc.code, gc.stderr.slice(-500)).toBe(0);
      const out = lastJson<{ snapshotDeltas: { dropped: string[] }; unrecordedImages: Array<{ snapshotId: string }> }>(gc);
      expect(out.snapshotDeltas.dropped.length + out.unrecordedImages.length).toBe(left.unrecorded.length + tags.unrecorded.length);
      expect(await layers()).toEqual({ recorded: 0, unrecorded: [] });
      expect((await snapshotTags(fx)).unrecorded, 'every snapshot image left is recorded').toEqual([]);
    } finally {
      await fx.cleanup();
    }
  });
});
