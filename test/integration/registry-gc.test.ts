import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshot } from '../../host/model';
import { pullImage } from '../../host/sandbox/registry';
import { openStore } from '../../host/store';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture, type PlanStepDef } from '../support/plan-fixture';
import { manifestStatus, startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';

type GcOut = { pruned: string[]; registryManifests: { deleted: string[]; pending: Array<{ registryRef: string; error: string }> } };

let registry: TestRegistry;
let engineB: SecondEngine | undefined;
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;

beforeAll(async () => {
  registry = await startRegistry();
}, 120_000);
afterAll(async () => {
  await engineB?.stop();
  await registry?.stop();
}, 120_000);
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const THREE: PlanStepDef[] = [
  { name: 'one', run: 'echo one > one.txt' },
  { name: 'two', run: 'echo two > two.txt' },
  { name: 'three', run: 'echo three > three.txt' },
];

/** Runs the plan to completion with every snapshot pushed (sync) and returns its snapshot records, oldest first. */
async function pushedRun(steps: PlanStepDef[], envYaml = ''): Promise<Snapshot[]> {
  fx = await planFixture(steps);
  const envFile = `${fx.dir}/env.yaml`;
  writeFileSync(envFile, readFileSync(envFile, 'utf8') + envYaml);
  const end = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address });
  expect(end.code, end.stderr).toBe(0);
  const snaps = await fx.read((s) => s.listSnapshots({}));
  expect(snaps.length).toBeGreaterThan(2);
  for (const s of snaps) expect(s.registryRef, s.id).toMatch(/@sha256:[0-9a-f]{64}$/);
  return snaps;
}

const digestOf = (s: Snapshot) => s.registryRef!.split('@')[1]!;
const status = (s: Snapshot) => manifestStatus(registry.address, 'berth-snapshot', digestOf(s));

describe('pruned snapshots leave the registry too', { timeout: 300_000 }, () => {
  it('berth gc --keep 1 deletes the manifests of the pruned pushed snapshots from the registry; the newest still answers and pulls on an engine that never had it', async () => {
    const snaps = await pushedRun(THREE);
    const newest = snaps.at(-1)!;
    const older = snaps.slice(0, -1);
    for (const s of snaps) expect(await status(s), s.id).toBe(200);

    const gc = await fx!.cli(['gc', '--keep', '1', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    for (const s of older) expect(await status(s), `${s.id} (${s.checkpoint})`).toBe(404);
    const out = lastJson<GcOut>(gc);
    expect(out.pruned.sort()).toEqual(older.map((s) => s.id).sort());
    expect(out.registryManifests.deleted.sort()).toEqual([...new Set(older.map((s) => s.registryRef!))].sort());
    expect(out.registryManifests.pending).toEqual([]);
    expect(await status(newest)).toBe(200);
    engineB ??= await startSecondEngine('b');
    expect(await pullImage(engineB.docker, newest.registryRef!, newest.imageId)).toBe('pulled');

    // A second gc has nothing left to delete (the deletions are recorded, not retried).
    const again = lastJson<GcOut>(await fx!.cli(['gc', '--keep', '1', '--json']));
    expect(again.registryManifests).toEqual({ deleted: [], pending: [] });
  });

  it('retention at the end of a run (snapshot.keepLast) deletes pruned manifests, but keeps one the newest snapshot shares (a step that changed nothing reuses the image)', async () => {
    const snaps = await pushedRun([{ name: 'one', run: 'echo one > one.txt' }, { name: 'same', run: 'true' }], 'snapshot: { keepLast: 1 }\n');
    const newest = snaps.at(-1)!;
    const shared = snaps.filter((s) => s.id !== newest.id && s.registryRef === newest.registryRef);
    const alone = snaps.filter((s) => s.id !== newest.id && s.registryRef !== newest.registryRef);
    // The unchanged step tagged the previous image: both records name one manifest.
    expect(shared.map((s) => s.checkpoint)).toEqual(['step:0:one']);
    expect(alone.length).toBeGreaterThan(0);
    expect(snaps.filter((s) => s.id !== newest.id).every((s) => s.prunedAt !== null)).toBe(true);
    for (const s of alone) expect(await status(s), `${s.id} (${s.checkpoint})`).toBe(404);
    expect(await status(newest)).toBe(200);
  });

  it('an unreachable registry does not fail gc: the deletions are reported pending and the next gc, with the registry back, makes them', async () => {
    const snaps = await pushedRun(THREE);
    const older = snaps.slice(0, -1);
    await registry.down();
    try {
      const gc = await fx!.cli(['gc', '--keep', '1', '--json']);
      expect(gc.code, gc.stderr).toBe(0);
      const out = lastJson<GcOut>(gc);
      expect(out.pruned.sort()).toEqual(older.map((s) => s.id).sort());
      expect(out.registryManifests.deleted).toEqual([]);
      expect(out.registryManifests.pending.map((p) => p.registryRef).sort()).toEqual([...new Set(older.map((s) => s.registryRef!))].sort());
      for (const p of out.registryManifests.pending) expect(p.error).toContain(registry.address);
    } finally {
      await registry.up();
    }
    for (const s of older) expect(await status(s)).toBe(200);

    const retry = await fx!.cli(['gc', '--keep', '1', '--json']);
    expect(retry.code, retry.stderr).toBe(0);
    const out = lastJson<GcOut>(retry);
    expect(out.pruned).toEqual([]);
    expect(out.registryManifests.deleted.sort()).toEqual([...new Set(older.map((s) => s.registryRef!))].sort());
    for (const s of older) expect(await status(s)).toBe(404);
    expect(await status(snaps.at(-1)!)).toBe(200);
  });

  it('a snapshot image pulled on engine B belongs to the store there: gc by a host with another id on B removes an unrecorded tag a killed host left on it, and keeps the recorded one', async () => {
    const snaps = await pushedRun(THREE);
    const newest = snaps.at(-1)!;
    engineB ??= await startSecondEngine('b');
    // What a restore on B does: pull by digest, verify the id, tag it with its record id.
    await pullImage(engineB.docker, newest.registryRef!, newest.imageId, { tag: { repo: 'berth-snapshot', tag: newest.id } });
    // A host on B killed between tagging a reuse snapshot and committing its record leaves this tag.
    const orphan = `snap_orphan${Math.random().toString(36).slice(2, 8)}`;
    await engineB.docker.getImage(newest.imageId).tag({ repo: 'berth-snapshot', tag: orphan });
    const tagsOnB = async () => ((await engineB!.docker.getImage(newest.imageId).inspect()) as { RepoTags: string[] }).RepoTags.sort();
    expect(await tagsOnB()).toEqual([`berth-snapshot:${newest.id}`, `berth-snapshot:${orphan}`].sort());

    const gc = await fx!.cli(['gc', '--grace', '0', '--json'], { DOCKER_HOST: engineB.dockerHost, BERTH_HOST_ID: `${fx!.hostId}-b` });
    expect(gc.code, gc.stderr).toBe(0);
    expect(await tagsOnB()).toEqual([`berth-snapshot:${newest.id}`]);
    expect(lastJson<{ unrecordedImages: Array<{ snapshotId: string }> }>(gc).unrecordedImages.map((o) => o.snapshotId)).toEqual([orphan]);
    await engineB.docker.getImage(newest.imageId).remove({ force: true });
  });

  it('gc of another store on the same engine leaves this store\'s unrecorded snapshot tag alone (snapshot images are no longer picked by host id); this store\'s gc removes it', async () => {
    const snaps = await pushedRun(THREE);
    const newest = snaps.at(-1)!;
    const orphan = `snap_orphan${Math.random().toString(36).slice(2, 8)}`;
    await fx!.docker.getImage(newest.imageId).tag({ repo: 'berth-snapshot', tag: orphan });
    const labels = ((await fx!.docker.getImage(newest.imageId).inspect()) as { Config: { Labels: Record<string, string> } }).Config.Labels;
    expect(labels['berth.store']).toBe(await fx!.read((s) => s.storeId()));
    const other = join(fx!.dir, 'other.db');
    await (await openStore(other)).close();
    const elsewhere = await runNode(await bundledCli(), ['gc', '--store', other, '--grace', '0', '--json'], { BERTH_HOST_ID: fx!.hostId });
    expect(elsewhere.code, elsewhere.stderr).toBe(0);
    expect(lastJson<{ unrecordedImages: unknown[] }>(elsewhere).unrecordedImages).toEqual([]);
    const tags = async () => ((await fx!.docker.getImage(newest.imageId).inspect()) as { RepoTags: string[] }).RepoTags;
    expect(await tags()).toContain(`berth-snapshot:${orphan}`);

    const own = await fx!.cli(['gc', '--grace', '0', '--json']);
    expect(lastJson<{ unrecordedImages: Array<{ snapshotId: string }> }>(own).unrecordedImages.map((o) => o.snapshotId)).toEqual([orphan]);
    expect(await tags()).not.toContain(`berth-snapshot:${orphan}`);
  });
});
