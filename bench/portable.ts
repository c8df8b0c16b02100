/**
 * portable: sandbox state that travels through an OCI registry (Debian's docker-registry on
 * loopback, a second engine as "another host"), each figure against a baseline of the same run:
 *
 * - cross_engine_restore_vs_raw: restoring a pushed snapshot on engine B (pull by digest, image
 *   id verified, lease, workspace digest verified) vs raw `docker pull` + create + start of the
 *   same image on B;
 * - push_delta_after_history_vs_fresh: the push of a snapshot holding a 1 MB change after 100 MB
 *   of pushed history vs the push of a 1 MB change on a fresh container;
 * - sync_push_step_vs_local: a step (1 MB write + snapshot) with `snapshot.push: sync` vs the
 *   same step without a registry;
 * - artifacts_vs_raw: bench/_portable-artifacts.ts (artifact copy-out of 50 MB vs raw getArchive).
 *
 * Each figure is its own function over a shared world, so further figures (artifacts) merge in.
 */
import Dockerode from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseEnvironment, type Environment } from '../environment';
import { RunSandbox } from '../host/run-sandbox';
import { containerCreateOptions, registryEngine, SandboxHost, snapshotEngine, type Lease } from '../host/sandbox';
import { Snapshotter, SnapshotTransport, type DeltaImages } from '../host/snapshot';
import { openSqliteStore, type Store } from '../host/store';
import { systemClock } from '../host/support';
import { startRegistry, type TestRegistry } from '../test/support/registry';
import { startSecondEngine, type SecondEngine } from '../test/support/second-engine';
import type { Report } from './run';
import { artifactsVsRaw } from './_portable-artifacts';
import { median, timed as time } from './_stats';

const ROUNDS = 5;
const logger = pino({ level: 'silent' });
const hostId = `bench-portable-${process.pid}`;
const signal = () => AbortSignal.timeout(300_000);

/** What every figure of this suite shares: the main engine (A), engine B, one registry, one store. */
interface World {
  docker: Dockerode;
  b: SecondEngine;
  registry: TestRegistry;
  store: Store;
  env: Environment;
  /** Plan sandboxes on A with and without the registry, and one on B with it. */
  local: RunSandbox;
  /** The snapshot images of `local` (a small snapshot is a layer in the store until the engine loads it). */
  localImages: DeltaImages;
  pushing: RunSandbox;
  onB: RunSandbox;
  transport: SnapshotTransport;
  hosts: SandboxHost[];
  session: string;
  /** Commits a snapshot record as a step's checkpoint would. */
  record(r: Awaited<ReturnType<RunSandbox['snapshot']>>['record']): Promise<void>;
}

async function write(lease: Lease, path: string, mb: number) {
  const r = await lease.exec(['sh', '-c', `head -c ${mb * 1024 * 1024} /dev/urandom > ${path}`], { timeoutMs: 300_000 });
  if (r.exitCode !== 0) throw new Error(`write failed: ${r.stderr}`);
}

async function clearEngine(docker: Dockerode) {
  for (const c of await docker.listContainers({ all: true })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  for (const i of await docker.listImages()) await docker.getImage(i.Id).remove({ force: true }).catch(() => {});
}

/** 1. Restore on B from the registry vs raw pull + create + start of the same image on B. */
export async function crossEngineRestore(w: World, report: Report): Promise<void> {
  const base = await w.pushing.leaseFresh('bench-x', w.session, w.env, signal());
  await write(base, '/workspace/data', 1);
  const s = await w.pushing.snapshot('bench-x', w.session, w.env, base, 'bench', null, signal());
  await w.record(s.record);
  await w.pushing.finish('bench-x');
  const restore: number[] = [];
  const raw: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    await clearEngine(w.b.docker);
    const [ms, e] = await time(() => w.onB.restore(`bench-x-${i}`, w.session, w.env, s.record.id, signal()));
    if (e.kind !== 'ok') throw new Error(e.reason);
    restore.push(ms);
    await w.onB.finish(`bench-x-${i}`);
    await clearEngine(w.b.docker);
    const opts = containerCreateOptions({ ...w.onB.spec(w.env), imageDigest: s.record.imageId }, { 'berth.host': hostId, 'berth.bench': '1' });
    const [rms] = await time(async () => {
      await new Promise<void>((resolve, reject) =>
        w.b.docker.pull(s.record.registryRef!, (err: Error | null, stream: NodeJS.ReadableStream) => (err ? reject(err) : w.b.docker.modem.followProgress(stream, (e: Error | null) => (e ? reject(e) : resolve())))),
      );
      const c = await w.b.docker.createContainer(opts);
      await c.start();
    });
    raw.push(rms);
  }
  await clearEngine(w.b.docker);
  report('cross_engine_restore_vs_raw', median(restore) / median(raw), 'ratio');
  report('cross_engine_restore_ms', median(restore), 'absolute');
}

/** 2. Push of a 1 MB change after 100 MB of pushed history vs push of a 1 MB change on a fresh container. */
export async function pushDeltaAfterHistory(w: World, report: Report): Promise<void> {
  const target = w.transport.target({ registry: w.registry.address, push: 'sync' })!;
  const pushOf = async (lease: Lease, runId: string) => {
    const s = await w.local.snapshot(runId, w.session, w.env, lease, 'bench', null, signal());
    // A small snapshot's image may still be a layer in the store: a push sends what the engine
    // holds (RunSandbox loads it first, as here); the figure is the push itself.
    await w.localImages.materialize(s.record.imageId);
    const [ms] = await time(() => w.transport.push(target, s.record.id, s.record.imageId));
    return { ms, lease: s.lease };
  };
  // History: 100 MB snapshotted and pushed (not measured); the lease moves onto the snapshot image.
  let hist = await w.local.leaseFresh('bench-h', w.session, w.env, signal());
  await write(hist, '/workspace/history', 100);
  hist = (await pushOf(hist, 'bench-h')).lease;
  const after: number[] = [];
  const fresh: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    await write(hist, `/workspace/delta-${i}`, 1);
    const h = await pushOf(hist, 'bench-h');
    hist = h.lease;
    after.push(h.ms);
    const f = await w.local.leaseFresh(`bench-f-${i}`, w.session, w.env, signal());
    await write(f, '/workspace/delta', 1);
    fresh.push((await pushOf(f, `bench-f-${i}`)).ms);
    await w.local.finish(`bench-f-${i}`);
  }
  await w.local.finish('bench-h');
  report('push_delta_after_history_vs_fresh', median(after) / median(fresh), 'ratio');
  report('push_1mb_ms', median(fresh), 'absolute');
}

/** 3. A step (1 MB write + snapshot) with a sync push vs the same step without a registry. */
export async function syncPushStep(w: World, report: Report): Promise<void> {
  const step = async (sb: RunSandbox, runId: string, i: number) => {
    const lease = sb.held(runId)!;
    const [ms] = await time(async () => {
      await write(lease, `/workspace/step-${i}`, 1);
      await sb.snapshot(runId, w.session, w.env, lease, `step:${i}`, null, signal());
    });
    return ms;
  };
  await w.pushing.leaseFresh('bench-sync', w.session, w.env, signal());
  await w.local.leaseFresh('bench-local', w.session, w.env, signal());
  const sync: number[] = [];
  const local: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    sync.push(await step(w.pushing, 'bench-sync', i));
    local.push(await step(w.local, 'bench-local', i));
  }
  await w.pushing.finish('bench-sync');
  await w.local.finish('bench-local');
  report('sync_push_step_vs_local', median(sync) / median(local), 'ratio');
  report('sync_push_step_ms', median(sync), 'absolute');
  report('local_step_ms', median(local), 'absolute');
}

export default async function portableBench(report: Report): Promise<void> {
  const docker = new Dockerode();
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-portable-'));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const registry = await startRegistry();
  const b = await startSecondEngine('p');
  const image = (await docker.getImage('berth/tiny:latest').inspect()).Id;
  const env = parseEnvironment(
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 512, diskMb: 4096 }\n`,
    'bench-env.yaml',
  );
  const hosts: SandboxHost[] = [];
  const snapshotters = new Map<RunSandbox, Snapshotter>();
  const sandboxOn = (d: Dockerode, transport?: SnapshotTransport) => {
    const sandbox = new SandboxHost({ docker: d, records: store, clock: systemClock, logger, hostId });
    hosts.push(sandbox);
    const snapshots = new Snapshotter({ engine: snapshotEngine(d), store, logger });
    const plan = new RunSandbox({ store, sandbox, snapshots, clock: systemClock, logger, transport });
    snapshotters.set(plan, snapshots);
    return plan;
  };
  const transportOn = (d: Dockerode) => new SnapshotTransport({ registry: registryEngine(d), store, logger, hostRegistry: registry.address });
  const transport = transportOn(docker);
  const session = 'bench-portable';
  let seq = 0;
  const local = sandboxOn(docker);
  const w: World = {
    docker,
    b,
    registry,
    store,
    env,
    local,
    localImages: snapshotters.get(local)!.images,
    pushing: sandboxOn(docker, transport),
    onB: sandboxOn(b.docker, transportOn(b.docker)),
    transport,
    hosts,
    session,
    async record(r) {
      await store.commit({ sessionId: session, label: 'bench.snapshot', ...(seq++ === 0 ? { createSession: {} } : {}), snapshots: [{ ...r, runId: null, taskId: null }] });
    },
  };
  try {
    await crossEngineRestore(w, report);
    await pushDeltaAfterHistory(w, report);
    await syncPushStep(w, report);
  } finally {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
    for (const i of await docker.listImages({ filters: { label: [`berth.host=${hostId}`] } })) await docker.getImage(i.Id).remove({ force: true }).catch(() => {});
    for (const h of hosts) await h.close().catch(() => {});
    await b.stop();
    await registry.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  await artifactsVsRaw(report);
}
