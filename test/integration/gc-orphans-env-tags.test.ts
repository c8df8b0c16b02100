import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';
import { readStore } from '../support/temp-store';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

// A fresh sandbox's first snapshot (nothing uploaded) is its environment's image tagged, with no
// commit, and an unchanged step after it tags that image again: berth/tiny carries the store's
// `berth-snapshot:<id>` tags but its own labels, which name no store. Once the store's file is
// deleted, `berth gc --orphans` must still tell whose tags they are.
type Fixture = Awaited<ReturnType<typeof planFixture>>;
const fixtures: Fixture[] = [];
const extraTags: string[] = [];
const markers: string[] = [];
afterEach(async () => {
  // Whatever the gc under test left of the deleted store (the fixture's clean-up reads the store, which is gone).
  for (const t of extraTags.splice(0)) await fixtures[0]?.docker.getImage(t).remove({ noprune: true }).catch(() => {});
  for (const m of markers.splice(0)) await fixtures[0]?.docker.getVolume(m).remove().catch(() => {});
  // Every fixture is cleaned up even when one's leak check fails (it throws after its own clean-up).
  const ends = await Promise.allSettled(fixtures.splice(0).map((f) => f.cleanup()));
  for (const e of ends) if (e.status === 'rejected') throw e.reason;
});

interface Orphans {
  orphans: { stores: Array<{ storeId: string; state: string; why: string; tags: Array<{ snapshotId: string; neededBy?: string }>; removed?: { images: number; tags: number; markers: number } }> };
}

/** A plan with no workspace: its upload snapshot is the environment's image tagged, and `zero` changes nothing. */
const noWorkspace = (f: Fixture) => writeFileSync(f.plan, readFileSync(f.plan, 'utf8').replace(/^workspace: ws\n/m, ''));
const deleteStore = (store: string) => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${store}${suffix}`, { force: true });
};

describe('berth gc --orphans and snapshot tags on an environment image', { timeout: 120_000 }, () => {
  it('attributes a deleted store\'s tags on berth/tiny to it and removes only those tags, never the image, a tag or image a store that exists records (even one with nothing else on the engine), or another store\'s', async () => {
    const steps = [{ name: 'zero', run: 'true' }, { name: 'one', run: 'echo one >> /tmp/steps.log' }];
    const [dead, kept] = await Promise.all([planFixture(steps), planFixture(steps)]);
    fixtures.push(dead!, kept!);
    for (const f of [dead!, kept!]) noWorkspace(f);
    for (const r of await Promise.all([dead!.cli(['run', dead!.plan]), kept!.cli(['run', kept!.plan])])) expect(r.code, r.stderr).toBe(0);
    const docker = dead!.docker;
    const tiny = await docker.getImage('berth/tiny:latest').inspect();
    const names = async () => (await docker.getImage(tiny.Id).inspect()).RepoTags ?? [];
    const snaps = async (f: Fixture) => f.read(async (s) => ({ id: await s.storeId(), snaps: await s.listSnapshots({}) }));
    const [d, k] = [await snaps(dead!), await snaps(kept!)];
    // The upload snapshot and `zero`'s are berth/tiny itself; `one`'s is a commit, labelled with its store.
    const onTiny = (x: typeof d) => x.snaps.filter((s) => s.imageId === tiny.Id).map((s) => s.id);
    expect(onTiny(d)).toHaveLength(2);
    expect(onTiny(k)).toHaveLength(2);
    const plain = (ids: string[]) => ids.map((id) => `berth-snapshot:${id}`);
    const twins = (x: typeof d) => onTiny(x).map((id) => `berth-snapshot/${x.id}:${id}`);
    extraTags.push(...plain(onTiny(d)), ...twins(d));
    expect(await names()).toEqual(expect.arrayContaining([...plain(onTiny(d)), ...plain(onTiny(k))]));
    const committed = d.snaps.find((s) => s.imageId !== tiny.Id)!;

    // Another store imports the dead store's run: it records the same snapshot ids, so their tags stay while it exists.
    const runId = (await dead!.read((s) => s.listRuns()))[0]!.id;
    const record = `${kept!.dir}/dead-run.json`;
    const importer = `${kept!.dir}/importer.db`;
    const cli = await bundledCli();
    const onImporter = (args: string[]) => runNode(cli, [...args, '--store', importer], { BERTH_HOST_ID: kept!.hostId, BERTH_OPERATOR: 'tester' }, 60_000);
    const exported = await dead!.cli(['export', runId, '--out', record]);
    expect(exported.code, exported.stderr).toBe(0);
    const imported = await onImporter(['import', record]);
    expect(imported.code, imported.stderr).toBe(0);
    expect(await readStore(importer, async (s) => (await s.getSnapshot(onTiny(d)[0]!))?.id)).toBe(onTiny(d)[0]);

    const importerId = await readStore(importer, (s) => s.storeId());
    markers.push(`berth-store-${importerId}`);

    // The name a registry transport leaves on a base it pulled (`HOST:PORT/berth-base:<id>`) sorts
    // before berth/tiny:latest: a registry test running beside this one had left one, and gc named
    // the image by it ("on 127.0.0.1:34427/berth-base:7312..."). Its operator knows it as berth/tiny.
    const transportName = `127.0.0.1:9/berth-base:${tiny.Id.replace(/^sha256:/, '')}`;
    await docker.getImage(tiny.Id).tag({ repo: '127.0.0.1:9/berth-base', tag: tiny.Id.replace(/^sha256:/, '') });
    extraTags.push(transportName);

    deleteStore(dead!.store);
    // From the store that exists, which knows nothing of the importer: the importer has nothing on
    // the engine but its marker (left by the import), which says where its records are. Before:
    // the dead store's image and tags it records were removed from under it.
    const [dry, fromKept] = [await kept!.cli(['gc', '--orphans']), await kept!.cli(['gc', '--orphans', '--remove', '--only', d.id, '--json'])];
    expect(dry.stdout).toContain(`store ${d.id} (${dead!.store}): 0 container(s), 0 network(s), 0 firewall rule(s), 1 snapshot image(s), 2 snapshot tag(s) on environment images can go`);
    for (const id of onTiny(d)) expect(dry.stdout).toMatch(new RegExp(`kept snapshot tag ${id} on berth/tiny:\\S+: store ${importer} records snapshot ${id}`));
    expect(fromKept.code, fromKept.stderr).toBe(0);
    const seenFromKept = lastJson<Orphans>(fromKept).orphans.stores.find((s) => s.storeId === d.id);
    expect(seenFromKept, fromKept.stdout).toMatchObject({ state: 'gone', removed: { images: 0, tags: 0 } });
    for (const t of seenFromKept!.tags) expect(t.neededBy).toBe(`store ${importer} records snapshot ${t.snapshotId}`);
    expect(await docker.getImage(committed.imageId).inspect().then(() => true, () => false)).toBe(true);
    expect(await names()).toEqual(expect.arrayContaining([...plain(onTiny(d)), ...twins(d)]));
    // --only: this engine is shared with other stores' tests; only the dead store's leftovers are taken.
    const fromImporter = await onImporter(['gc', '--orphans', '--remove', '--only', d.id, '--json']);
    expect(fromImporter.code, fromImporter.stderr).toBe(0);
    const seen = lastJson<Orphans>(fromImporter).orphans.stores.find((s) => s.storeId === d.id);
    expect(seen, fromImporter.stdout).toMatchObject({ state: 'gone' });
    expect(seen!.tags.map((t) => t.snapshotId).sort()).toEqual(onTiny(d).sort());
    for (const t of seen!.tags) expect(t.neededBy).toMatch(/^this store \(store_\w+\) records snapshot snap_/);
    expect(seen!.removed).toMatchObject({ tags: 0 });
    expect(await names()).toEqual(expect.arrayContaining([...plain(onTiny(d)), ...twins(d)]));

    // Once the importer is deleted too, nothing records them: from the store that exists, they go, and only they.
    deleteStore(importer);
    const removed = await kept!.cli(['gc', '--orphans', '--remove', '--only', d.id, '--only', importerId, '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    const gone = lastJson<Orphans>(removed).orphans.stores.find((s) => s.storeId === d.id);
    expect(gone).toMatchObject({ state: 'gone', removed: { tags: 2, images: 1 } });
    // The importer's marker goes with it, as its store is gone too.
    expect(lastJson<Orphans>(removed).orphans.stores.find((s) => s.storeId === importerId)).toMatchObject({ state: 'gone', removed: { markers: 1 } });
    expect(await docker.getVolume(`berth-store-${importerId}`).inspect().then(() => true, () => false)).toBe(false);
    const after = await names();
    for (const t of [...plain(onTiny(d)), ...twins(d)]) expect(after).not.toContain(t);
    // The environment's image and its own names stay; the store that exists keeps its tags and its committed image.
    expect(after).toEqual(expect.arrayContaining(['berth/tiny:latest', ...plain(onTiny(k)), ...twins(k)]));
    for (const s of k.snaps) expect(await docker.getImage(s.imageId).inspect().then(() => true, () => false)).toBe(true);
    expect(await docker.getImage(committed.imageId).inspect().then(() => true, () => false)).toBe(false);
  });
});
