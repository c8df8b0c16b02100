import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, existsSync, rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';
import { runNode } from '../support/child';
import { readStore } from '../support/temp-store';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

// What a store whose file was deleted left on the engine: no other store's records name it, so only
// `berth gc --orphans` finds it, by the labels every container and snapshot image carries.
type Fixture = Awaited<ReturnType<typeof planFixture>>;
const fixtures: Fixture[] = [];
const children: Array<{ kill(): void; exited: Promise<unknown> }> = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    c.kill();
    await c.exited;
  }
  for (const f of fixtures.splice(0)) await f.cleanup();
});

interface Orphans {
  orphans: {
    storeId: string | null;
    remove: boolean;
    stores: Array<{ storeId: string; state: string; why: string; containers: unknown[]; images: Array<{ imageId: string; neededBy?: string }>; networks: Array<{ id: string; name: string }>; rules: Array<{ tag: string; leaseId: string; network: string | null }>; removed?: { containers: number; networks: number; images: number; rules: number; markers?: number } }>;
    unattributedRules: Array<{ tag: string }>;
  };
}

const deleteStore = (store: string) => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${store}${suffix}`, { force: true });
};
const onEngine = async (f: Fixture) => ({
  containers: (await f.docker.listContainers({ all: true, filters: { label: [`berth.host=${f.hostId}`] } })).length,
  images: (await f.docker.listImages({ filters: { label: [`berth.host=${f.hostId}`, 'berth.snapshot'] } })).length,
  networks: (await f.docker.listNetworks({ filters: { label: [`berth.host=${f.hostId}`] } })).length,
  // The iptables and ip6tables rules of its allowlist sandboxes (tagged `berth:<host>:<lease>`).
  rules: ['iptables', 'ip6tables'].flatMap((tool) => execFileSync(tool, ['-w', '-S'], { encoding: 'utf8' }).split('\n')).filter((l) => l.includes(`berth:${f.hostId}:`)).length,
});
// Its sandboxes are on an internal bridge with INPUT/FORWARD rules and the egress proxy.
const allowlist = (f: Fixture) => appendFileSync(`${f.dir}/env.yaml`, 'network: { mode: allowlist, allow: [] }\n');

describe('berth gc --orphans', { timeout: 300_000 }, () => {
  it('removes, only with --remove, what a store whose file was deleted left (its host killed mid-run), and never a store that exists or one whose host still runs', async () => {
    // `zero` changes nothing: its snapshot is the upload snapshot's image, on the engine and recorded (exported below).
    const steps = [{ name: 'zero', run: 'true' }, { name: 'one', run: 'echo one >> steps.log' }];
    const [dead, kept, live, early] = await Promise.all([planFixture(steps), planFixture(steps), planFixture([{ name: 'slow', run: 'sleep 300' }]), planFixture([{ name: 'one', run: 'true' }])]);
    fixtures.push(dead!, kept!, live!, early!);
    for (const f of [dead!, kept!, live!, early!]) allowlist(f);
    const kills = [dead!, kept!].map((f) => {
      f.allowLeftovers('its host is killed in its step and never resumed: the run keeps its sandbox and upload snapshot (the dead store\'s are removed by the gc under test)');
      // Before the step's commit: its snapshot layer is not loaded into the engine in the background, so what the host left stays as it was.
      return f.cli(['run', f.plan], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    });
    // A host killed once its sandbox's network and rules are in and before its container exists:
    // a network and its rules are all it leaves on the engine (its upload layer is in its store only).
    early!.allowLeftovers('its host is killed between its sandbox network and its container; the gc under test removes them');
    const earlyKill = early!.cli(['run', early!.plan], { BERTH_FAULT: 'sandbox:egress-open' });
    // A host still driving a run on a store whose file is then deleted: it holds the file open.
    live!.allowLeftovers('its store file is deleted while its host runs; the host is killed at the end and nothing records its sandbox');
    const child = spawn(process.execPath, [await bundledCli(), 'run', live!.plan, '--store', live!.store], { env: { ...process.env, BERTH_HOST_ID: live!.hostId }, stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((r) => child.once('exit', r));
    children.push({ kill: () => child.kill('SIGKILL'), exited });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    for (let waited = 0; !stderr.includes('▶ [1/1] slow'); waited += 50) {
      if (waited > 120_000) throw new Error(`the live host never started its step:\n${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const killed of await Promise.all([...kills, earlyKill])) expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const ids = { dead: await dead!.read((s) => s.storeId()), kept: await kept!.read((s) => s.storeId()), live: await live!.read((s) => s.storeId()), early: await early!.read((s) => s.storeId()) };
    // The engine is shared with other stores' tests: --remove takes only this test's stores' (the live one's is never taken: it is checked below).
    const only = [ids.dead, ids.live, ids.early].flatMap((id) => ['--only', id]);
    // Its upload snapshot's image, the sandbox's image, goes as an operator's `docker rmi` takes it: nothing on the engine names the store's location but the network then.
    for (const img of await early!.docker.listImages({ filters: { label: [`berth.host=${early!.hostId}`, 'berth.snapshot'] } })) await early!.docker.getImage(img.Id).remove({ force: true });
    const earlyLeft = await onEngine(early!);
    expect(earlyLeft).toMatchObject({ containers: 0, images: 0, networks: 1 });
    expect(earlyLeft.rules).toBeGreaterThan(0);
    // A rule of the dead host whose lease no network or container names (its network removed by an
    // older gc --orphans): which store put it in cannot be told, so it is listed and left. Inert: no such bridge.
    const stray = `berth:${dead!.hostId}:lease_nonetwork`;
    execFileSync('iptables', ['-w', '-I', 'INPUT', '-i', 'br-000000000000', '-j', 'DROP', '-m', 'comment', '--comment', stray]);
    const left = await onEngine(dead!);
    expect(left.containers).toBeGreaterThan(0);
    expect(left.images).toBeGreaterThan(0);
    expect(left.rules).toBeGreaterThan(1);
    expect((await onEngine(live!)).rules).toBeGreaterThan(0);
    // Another store imported the dead store's run (berth export / import): its records name the dead
    // store's snapshot image, which keeps the dead store's labels (as one pulled from a registry onto
    // another engine does: labels are part of the image id), and that store has nothing else here.
    const record = `${kept!.dir}/dead-run.json`;
    const importer = `${kept!.dir}/importer.db`;
    const cli = await bundledCli();
    const onImporter = (args: string[]) => runNode(cli, [...args, '--store', importer], { BERTH_HOST_ID: kept!.hostId, BERTH_OPERATOR: 'tester' }, 120_000);
    const runId = (await dead!.read((s) => s.listRuns()))[0]!.id;
    // Before it was deleted, the dead store is a store that exists: --remove takes nothing of it (meanwhile the import: neither changes the engine).
    const [before, [exported, imported]] = await Promise.all([
      kept!.cli(['gc', '--orphans', '--remove', ...only, '--json']),
      dead!.cli(['export', runId, '--out', record]).then(async (e) => [e, e.code === 0 ? await onImporter(['import', record]) : e] as const),
    ]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(imported.code, imported.stderr).toBe(0);
    const named = await readStore(importer, async (s) => new Set((await s.listSnapshots({ pruned: false })).map((x) => x.imageId)));
    const importerId = await readStore(importer, (s) => s.storeId());
    const needed = (await dead!.docker.listImages({ filters: { label: [`berth.host=${dead!.hostId}`, 'berth.snapshot'] } })).filter((i) => named.has(i.Id)).map((i) => i.Id);
    expect(needed.length).toBeGreaterThan(0);
    expect(before.code, before.stderr).toBe(0);
    expect(lastJson<Orphans>(before).orphans.stores.find((s) => s.storeId === ids.dead)).toMatchObject({ state: 'exists' });
    expect(await onEngine(dead!)).toEqual(left);

    deleteStore(dead!.store);
    deleteStore(live!.store);
    deleteStore(early!.store);
    // The operator starts afresh at the deleted store's path: the new store has an id of its own, so
    // the old one's leftovers are still a gone store's. Before: listed `exists` and left for ever.
    const afresh = openSqliteStore(dead!.store);
    const newId = await afresh.storeId();
    await afresh.close();
    expect(newId).not.toBe(ids.dead);
    const logs = () => ['-wal', '-shm'].filter((x) => existsSync(`${dead!.store}${x}`));
    expect(logs()).toEqual([]);
    // Without --remove it only says what it would take, and why it leaves the others.
    // With no store where it runs (an operator whose only store was deleted): it looks at the engine
    // alone and creates no store. Before: store_not_found, so such an operator had to make one first.
    const nowhere = `${kept!.dir}/none/berth.db`;
    const [dry, bare] = await Promise.all([kept!.cli(['gc', '--orphans']), runNode(cli, ['gc', '--orphans', '--json', '--store', nowhere], { BERTH_HOST_ID: kept!.hostId }, 120_000)]);
    expect(dry.code, dry.stderr).toBe(0);
    // Reading the store now at that path created no file beside it (a -wal or -shm of another
    // user's would stop that store's next write). Before: both, left behind by the identity read.
    expect(logs()).toEqual([]);
    expect(dry.stdout).toContain(`store ${ids.dead} (${dead!.store}): ${left.containers} container(s)`);
    expect(dry.stdout).toMatch(new RegExp(`store ${ids.dead} .*, ${left.rules - 1} firewall rule\\(s\\)`));
    expect(dry.stdout).toMatch(new RegExp(`left \\d+ firewall rule\\(s\\) no network or container on this engine attributes to a store \\(which store put them in cannot be told\\): .*${stray} \\(br-000000000000, gone\\)`));
    expect(dry.stdout).toContain(`is another store now (${newId})`);
    expect(dry.stdout).toContain('berth gc --orphans --remove');
    expect(dry.stdout).toMatch(new RegExp(`left store ${ids.live} \\(${live!.store}\\): .*(is alive|holds the deleted file open)`));
    expect(await onEngine(dead!)).toEqual(left);
    expect(bare.code, bare.stderr).toBe(0);
    expect(lastJson<Orphans>(bare).orphans.storeId).toBeNull();
    expect(lastJson<Orphans>(bare).orphans.stores.find((s) => s.storeId === ids.dead)).toMatchObject({ state: 'gone' });
    expect(lastJson<Orphans>(bare).orphans.stores.find((s) => s.storeId === ids.kept)).toMatchObject({ state: 'exists' });
    // A store whose network is all it left is judged by the network's own labels. Before: 'unknown' (no location label), left for ever.
    expect(lastJson<Orphans>(bare).orphans.stores.find((s) => s.storeId === ids.early)).toMatchObject({ state: 'gone', location: early!.store, containers: [], images: [], networks: [{ name: expect.stringMatching(/^berth-net-lease_/) }] });
    expect(await onEngine(early!)).toEqual(earlyLeft);
    expect(existsSync(nowhere)).toBe(false);
    expect(await onEngine(dead!)).toEqual(left);

    // From the importing store: the dead store's image it names stays, saying why; the rest goes.
    const liveBefore = await onEngine(live!);
    const keptBefore = await onEngine(kept!);
    const fromImporter = await onImporter(['gc', '--orphans', '--remove', ...only, '--json']);
    expect(fromImporter.code, fromImporter.stderr).toBe(0);
    const stores = lastJson<Orphans>(fromImporter).orphans.stores;
    expect(stores.find((s) => s.storeId === ids.kept)).toMatchObject({ state: 'exists' });
    const deadOnes = stores.find((s) => s.storeId === ids.dead)!;
    expect(deadOnes).toMatchObject({ state: 'gone', removed: { containers: left.containers, images: left.images - needed.length, rules: left.rules - 1 } });
    for (const id of needed) expect(deadOnes.images.find((i) => i.imageId === id)?.neededBy).toMatch(/^this store \(store_\w+\) names it in snapshot snap_/);
    // Each rule says what it belonged to: the lease of its tag and that lease's network.
    expect(deadOnes.rules.length).toBe(left.rules - 1);
    for (const r of deadOnes.rules) expect(r).toMatchObject({ tag: `berth:${dead!.hostId}:${r.leaseId}`, network: `berth-net-${r.leaseId}` });
    expect(lastJson<Orphans>(fromImporter).orphans.unattributedRules.map((r) => r.tag)).toContain(stray);
    expect(stores.find((s) => s.storeId === ids.early)).toMatchObject({ state: 'gone', removed: { containers: 0, networks: 1, images: 0, rules: earlyLeft.rules } });
    expect(await onEngine(early!)).toEqual({ containers: 0, images: 0, networks: 0, rules: 0 });
    expect(stores.find((s) => s.storeId === ids.live)).toMatchObject({ state: 'live' });
    expect(stores.find((s) => s.storeId === ids.live)!.removed).toBeUndefined();
    expect(await onEngine(dead!)).toEqual({ containers: 0, images: needed.length, networks: 0, rules: 1 });
    expect(await onEngine(live!)).toEqual(liveBefore);
    expect(await onEngine(kept!)).toEqual(keptBefore);

    // Once the importing store is deleted too, nothing names it: from another store (one that
    // exists, whose own leftovers are its plain gc's business) it goes.
    deleteStore(importer);
    // The importer's marker (left by its import) goes with it.
    const removed = await kept!.cli(['gc', '--orphans', '--remove', ...only, '--only', importerId, '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(lastJson<Orphans>(removed).orphans.stores.find((s) => s.storeId === ids.kept)).toBeUndefined();
    expect(lastJson<Orphans>(removed).orphans.stores.find((s) => s.storeId === ids.dead)).toMatchObject({ state: 'gone', removed: { containers: 0, images: needed.length, rules: 0 } });
    expect(lastJson<Orphans>(removed).orphans.stores.find((s) => s.storeId === importerId)).toMatchObject({ state: 'gone', removed: { markers: 1 } });
    expect(await onEngine(dead!)).toEqual({ containers: 0, images: 0, networks: 0, rules: 1 });
    expect(await onEngine(live!)).toEqual(liveBefore);
    expect(await onEngine(kept!)).toEqual(keptBefore);
  });
});
