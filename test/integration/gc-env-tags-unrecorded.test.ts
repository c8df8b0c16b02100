import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { tagSnapshotImage } from '../../host/sandbox/snapshot-image';
import { lastJson, planFixture } from '../support/plan-fixture';

// A fresh sandbox's first snapshot is its environment's image tagged (`berth-snapshot:<id>` and the
// twin `berth-snapshot/<store>:<id>`), with no labels of its own. A host killed after the tag and
// before the snapshot's record committed left both: `berth gc` listed snapshot images by their labels
// only, so nothing ever removed them (the twin names the store, the id its time).
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** A snapshot id as the host makes them (host/support/ids.ts), made at `ms`. */
const snapshotIdAt = (ms: number) => `snap_${ms.toString(16).padStart(12, '0')}0000${Math.floor(Math.random() * 2 ** 32).toString(16).padStart(8, '0')}`;

interface Gc {
  unrecordedImages: Array<{ snapshotId: string; outcome: string }>;
  keptImages: Array<{ snapshotId: string; why: string }>;
}

describe('berth gc and snapshot tags on an environment image that no record names', { timeout: 180_000 }, () => {
  it("removes this store's unrecorded tags on berth/tiny once older than the grace, keeps a young one and every recorded one, and never the image or another store's", async () => {
    fx = await planFixture([{ name: 'zero', run: 'true' }]);
    // No workspace: the run's snapshots are berth/tiny tagged, recorded by the store.
    writeFileSync(fx.plan, readFileSync(fx.plan, 'utf8').replace(/^workspace: ws\n/m, ''));
    const run = await fx.cli(['run', fx.plan]);
    expect(run.code, run.stderr).toBe(0);
    const { storeId, recorded } = await fx.read(async (s) => ({ storeId: await s.storeId(), recorded: (await s.listSnapshots({})).map((x) => x.id) }));
    expect(recorded.length).toBeGreaterThan(0);
    const tiny = (await fx.docker.getImage('berth/tiny:latest').inspect()).Id;
    const old = snapshotIdAt(Date.now() - 3_600_000);
    const young = snapshotIdAt(Date.now());
    const elsewhere = snapshotIdAt(Date.now() - 3_600_000);
    const other = `store_${randomBytes(8).toString('hex')}`;
    await tagSnapshotImage(fx.docker, tiny, old, { storeId });
    await tagSnapshotImage(fx.docker, tiny, young, { storeId });
    await tagSnapshotImage(fx.docker, tiny, elsewhere, { storeId: other });
    try {
      const gc = await fx.cli(['gc', '--json']);
      expect(gc.code, gc.stderr).toBe(0);
      const out = lastJson<Gc>(gc);
      // Before: neither listed, and both of the old one's names still on berth/tiny.
      expect(out.unrecordedImages.map((o) => o.snapshotId)).toEqual([old]);
      expect(out.keptImages).toContainEqual(expect.objectContaining({ snapshotId: young, why: 'grace' }));
      const names = (await fx.docker.getImage(tiny).inspect()).RepoTags ?? [];
      expect(names).not.toContain(`berth-snapshot:${old}`);
      expect(names).not.toContain(`berth-snapshot/${storeId}:${old}`);
      for (const kept of [young, ...recorded]) expect(names).toContain(`berth-snapshot:${kept}`);
      expect(names).toContain(`berth-snapshot/${other}:${elsewhere}`);
      expect(names).toContain('berth/tiny:latest');

      // While a run of the store is unfinished (submitted, no worker yet), it may be about to record
      // such a tag: kept, even with --grace 0; once that run has ended, taken.
      const submitted = await fx.cli(['run', fx.plan, '--detach', '--json']);
      expect(submitted.code, submitted.stderr).toBe(0);
      const pending = lastJson<{ runId: string }>(submitted).runId;
      const older = snapshotIdAt(Date.now() - 3_600_000);
      await tagSnapshotImage(fx.docker, tiny, older, { storeId });
      const held = lastJson<Gc>(await fx.cli(['gc', '--grace', '0', '--json']));
      expect(held.unrecordedImages.map((o) => o.snapshotId)).not.toContain(older);
      expect(held.keptImages).toContainEqual(expect.objectContaining({ snapshotId: older, why: 'run_unfinished' }));
      const cancelled = await fx.cli(['cancel', pending, '--wait']);
      expect(cancelled.code, cancelled.stderr).toBe(0);
      const taken = lastJson<Gc>(await fx.cli(['gc', '--grace', '0', '--json']));
      expect(taken.unrecordedImages.map((o) => o.snapshotId).sort()).toEqual([older, young].sort());
      expect((await fx.docker.getImage(tiny).inspect()).RepoTags ?? []).not.toContain(`berth-snapshot/${storeId}:${older}`);
    } finally {
      for (const n of [`berth-snapshot:${elsewhere}`, `berth-snapshot/${other}:${elsewhere}`]) await fx.docker.getImage(n).remove({ noprune: true }).catch(() => {});
    }
  });
  it("leaves nothing a later gc cannot find when a host is killed between an environment image's two snapshot tags or between their removals", async () => {
    fx = await planFixture([{ name: 'zero', run: 'true' }]);
    writeFileSync(fx.plan, readFileSync(fx.plan, 'utf8').replace(/^workspace: ws\n/m, ''));
    const tiny = (await fx.docker.getImage('berth/tiny:latest').inspect()).Id;
    const names = async () => (await fx!.docker.getImage(tiny).inspect()).RepoTags ?? [];

    // Killed at its first snapshot, after the twin naming the store and before the plain tag.
    const killed = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'snapshot:twin-tagged' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const { storeId, runId } = await fx.read(async (s) => ({ storeId: await s.storeId(), runId: (await s.listRuns())[0]!.id }));
    const left = (await names()).filter((n) => n.startsWith(`berth-snapshot/${storeId}:`));
    expect(left).toHaveLength(1);
    const snap = left[0]!.split(':')[1]!;
    expect(await names()).not.toContain(`berth-snapshot:${snap}`);
    // The killed run is unfinished, so its twin is kept; cancelled (no host is left to drive it), taken.
    const cancelled = await fx.cli(['cancel', runId, '--wait']);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    const gc = lastJson<Gc>(await fx.cli(['gc', '--grace', '0', '--json']));
    expect(gc.unrecordedImages).toContainEqual(expect.objectContaining({ snapshotId: snap, outcome: 'untagged' }));
    expect(await names()).not.toContain(`berth-snapshot/${storeId}:${snap}`);

    // Killed inside gc, between the removal of one tag and the other's: the next gc finishes it.
    const old = snapshotIdAt(Date.now() - 3_600_000);
    await tagSnapshotImage(fx.docker, tiny, old, { storeId });
    const cut = await fx.cli(['gc', '--grace', '0', '--json'], { BERTH_FAULT: 'snapshot:plain-untagged' });
    expect(cut.signal, cut.stderr).toBe('SIGKILL');
    expect((await names()).filter((n) => n.endsWith(`:${old}`))).toHaveLength(1);
    const again = lastJson<Gc>(await fx.cli(['gc', '--grace', '0', '--json']));
    expect(again.unrecordedImages.map((o) => o.snapshotId)).toEqual([old]);
    expect((await names()).filter((n) => n.endsWith(`:${old}`))).toEqual([]);
    expect(await names()).toContain('berth/tiny:latest');
  });
});
