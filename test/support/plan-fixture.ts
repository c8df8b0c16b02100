import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import type { Store } from '../../host/store';
import { removeBridgeRules } from '../../host/sandbox/sandbox-network';
import { readStore } from './temp-store';
import { removeStoreSnapshotTags } from './snapshot-tags';
import { runNode, type ChildEnd } from './child';
import { leakGuard, type Leftover } from './leak-check';
import { invariantGuard } from './invariant-check';
import { requireEngine, requireTinyImage } from './docker-engine';

/**
 * The `berth` command as a user runs it (host/cli/bin.mjs: dist/berth.cjs with V8's code cache),
 * kept fresh by the suite's setup (test/support/global-build.ts).
 */
export function bundledCli(): Promise<string> {
  return Promise.resolve(join(process.cwd(), 'host', 'cli', 'bin.mjs'));
}

export interface PlanStepDef {
  name: string;
  run: string;
  replay?: 'safe' | 'never';
  /** Workspace globs copied out into the artifact store after the step. */
  artifacts?: string[];
}

/**
 * A plan on berth/tiny in its own temp dir with its own store and host id (so one test's sweeper
 * never takes another test's containers). `cleanup` removes containers and snapshot images it made.
 */
export async function planFixture(
  steps: PlanStepDef[],
  files: Record<string, string> = { 'README': 'fixture\n' },
  opts: { store?: string } = {},
) {
  const docker = await requireEngine();
  const image = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-plan-'));
  mkdirSync(join(dir, 'ws'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, 'ws', name), text);
  writeFileSync(
    join(dir, 'env.yaml'),
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`,
  );
  const stepYaml = steps
    .map((s) => `  - name: ${s.name}\n    run: ${JSON.stringify(s.run)}\n    replay: ${s.replay ?? 'safe'}${s.artifacts ? `\n    artifacts: ${JSON.stringify(s.artifacts)}` : ''}`)
    .join('\n');
  writeFileSync(join(dir, 'plan.yaml'), `name: fixture\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${stepYaml}\n`);
  const hostId = `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  // A postgres:// URL puts the run in that database; the default is a SQLite file in the temp dir.
  const store = opts.store ?? join(dir, 'berth.db');
  const script = await bundledCli();
  const leaks = leakGuard(docker, hostId);
  const invariants = invariantGuard();
  const cli = (args: string[], env: Record<string, string> = {}): Promise<ChildEnd> =>
    runNode(script, [...args, '--store', store], { BERTH_HOST_ID: hostId, BERTH_OPERATOR: 'tester', ...env }, Number(process.env.BERTH_TEST_CLI_TIMEOUT_MS ?? 180_000));
  return {
    dir,
    docker,
    hostId,
    store,
    plan: join(dir, 'plan.yaml'),
    cli,
    /** The store's view, opened for one read and closed again. */
    read: <T>(fn: (s: Store) => Promise<T>): Promise<T> => readStore(store, fn),
    /**
     * Removes a snapshot's image as an operator would (`docker rmi -f`), wherever it is: on the
     * engine, and in the store when it is still a layer the engine has not loaded (a host killed
     * within moments of the snapshot).
     */
    async removeSnapshotImage(snapshotId: string) {
      await docker.getImage(`berth-snapshot:${snapshotId}`).remove({ force: true }).catch(() => {});
      await readStore(store, async (s) => {
        const snap = await s.getSnapshot(snapshotId);
        if (snap) await s.deleteSnapshotDelta(snap.imageId);
      });
    },
    /** Opts this test out of the leak check, with the reason it leaves objects behind on purpose. */
    allowLeftovers: (reason: string, only?: (l: Leftover) => boolean) => leaks.allowLeftovers(reason, only),
    /** Opts this test out of named run invariants (`berth check`), with the reason its runs break them on purpose. */
    allowViolations: (reason: string, names: Parameters<typeof invariants.allowViolations>[1]) => invariants.allowViolations(reason, names),
    /**
     * Fails (after removing everything, so nothing reaches the next test) when a container, network
     * or snapshot image of the host id remains that the store does not record as kept.
     */
    async cleanup() {
      let leak: unknown;
      try {
        leak = await leaks.check(store);
      } catch (err) {
        leak = err;
      }
      // Every run the test created keeps the run invariants (issue 17), when the test made a store.
      let broken: unknown;
      try {
        if (existsSync(store)) broken = await invariants.check(store);
      } catch (err) {
        broken = err;
      }
      await removeHostArtifacts(docker, hostId, [store]);
      // The markers a `berth import` into any store of this fixture's directory left (host/sandbox/store-marker.ts).
      const markers = ((await docker.listVolumes({ filters: { label: ['berth.store.marker'] } })) as { Volumes?: Array<{ Name: string; Labels?: Record<string, string> | null }> | null }).Volumes ?? [];
      for (const v of markers) if (v.Labels?.['berth.store.location']?.startsWith(`${dir}/`)) await docker.getVolume(v.Name).remove().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      if (leak) throw leak;
      if (broken) throw broken;
    },
  };
}

/**
 * Removes every container, sandbox network, INPUT rule and snapshot image of the host id, and the
 * snapshot tags the `stores` (SQLite files) record: a fresh sandbox's first snapshot is a tag on the
 * environment's image, which carries no host label (snapshot-tags.ts).
 */
export async function removeHostArtifacts(docker: Dockerode, hostId: string, stores: string[] = []): Promise<void> {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  }
  // Sandbox networks and their INPUT rules (a session's sandbox outlives the command that made it).
  for (const n of await docker.listNetworks({ filters: { label: [`berth.host=${hostId}`] } })) await docker.getNetwork(n.Id).remove().catch(() => {});
  await removeBridgeRules((t) => t.startsWith(`berth:${hostId}:`)).catch(() => {});
  // Only snapshot tags: a forced removal by id would also take any other tag on the same image.
  for (const img of await docker.listImages({ filters: { label: [`berth.host=${hostId}`] } })) {
    const tags = (img.RepoTags ?? []).filter((t) => t !== '<none>:<none>');
    for (const tag of tags) if (tag.startsWith('berth-snapshot:')) await docker.getImage(tag).remove().catch(() => {});
    // An untagged snapshot image has no other name to lose; only this host made it.
    if (tags.length === 0 && img.Labels?.['berth.snapshot'] !== undefined) await docker.getImage(img.Id).remove().catch(() => {});
  }
  // Last: no container of the host holds their images any more.
  for (const s of stores) await removeStoreSnapshotTags(docker, s);
}

/** The JSON a `--json` command printed last on stdout. */
export function lastJson<T>(end: ChildEnd): T {
  const lines = end.stdout.trim().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    if (lines[i]!.startsWith('{') || lines[i]!.startsWith('[')) {
      try {
        return JSON.parse(lines.slice(i).join('\n')) as T;
      } catch {
        // a multi-line JSON value starts further up
      }
    }
  }
  throw new Error(`no JSON on stdout:\n${end.stdout}\n${end.stderr}`);
}
