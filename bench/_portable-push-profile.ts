/**
 * Where the time of a step with a sync push goes (not a suite): `npx tsx bench/_portable-push-profile.ts [ROUNDS]`.
 * Steps with and without a registry, interleaved, with the debug timing lines and every registry
 * request (method, path kind, ms) of the pushing steps.
 */
import Dockerode from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseEnvironment } from '../environment';
import { RunSandbox } from '../host/run-sandbox';
import { registryEngine, SandboxHost, snapshotEngine, type Lease } from '../host/sandbox';
import { Snapshotter, SnapshotTransport } from '../host/snapshot';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { startRegistry } from '../test/support/registry';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 9);
const hostId = `bench-push-profile-${process.pid}`;
const phases = new Map<string, number[]>();
let tag = '';
const sink = { write: (line: string) => { const o = JSON.parse(line) as { msg: string; phase?: string; ms?: number }; if (o.msg === 'timing' && o.phase && tag) { const k = `${tag} ${o.phase}`; phases.set(k, [...(phases.get(k) ?? []), o.ms!]); } } };
const logger = pino({ level: 'debug' }, sink);
(globalThis as any).__trace = (k: string, ms: number) => { if (tag) { const key = `${tag} trace ${k}`; phases.set(key, [...(phases.get(key) ?? []), ms]); } };
const realFetch = globalThis.fetch;
globalThis.fetch = (async (url: string | URL, init?: RequestInit) => {
  const t0 = performance.now();
  const res = await realFetch(url, init);
  const p = String(url).replace(/^https?:\/\/[^/]+/, '').replace(/sha256:[0-9a-f]+|[0-9a-f-]{36}[^/]*|snap_[A-Za-z0-9_-]+/g, 'X');
  const k = `${tag} http ${init?.method ?? 'GET'} ${p.split('?')[0]}`;
  phases.set(k, [...(phases.get(k) ?? []), performance.now() - t0]);
  return res;
}) as typeof fetch;

async function main() {
  const docker = new Dockerode();
  const dir = mkdtempSync(join(tmpdir(), 'berth-push-profile-'));
  const store = openSqliteStore(join(dir, 'p.db'));
  const registry = await startRegistry();
  const image = (await docker.getImage('berth/tiny:latest').inspect()).Id;
  const env = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 512, diskMb: 4096 }\n`, 'env.yaml');
  const hosts: SandboxHost[] = [];
  const on = (transport?: SnapshotTransport) => {
    const sandbox = new SandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
    hosts.push(sandbox);
    return new RunSandbox({ store, sandbox, snapshots: new Snapshotter({ engine: snapshotEngine(docker), store, logger }), clock: systemClock, logger, transport });
  };
  const pushing = on(new SnapshotTransport({ registry: registryEngine(docker), store, logger, hostRegistry: registry.address }));
  const local = on();
  const signal = AbortSignal.timeout(600_000);
  const step = async (sb: RunSandbox, runId: string, i: number) => {
    const lease: Lease = sb.held(runId)!;
    const w = await lease.exec(['sh', '-c', `head -c 1048576 /dev/urandom > /workspace/step-${i}`], { timeoutMs: 60_000 });
    if (w.exitCode !== 0) throw new Error(w.stderr);
    const t0 = performance.now();
    await sb.snapshot(runId, 's', env, lease, `step:${i}`, null, signal);
    return performance.now() - t0;
  };
  try {
    await pushing.leaseFresh('sync', 's', env, signal);
    await local.leaseFresh('local', 's', env, signal);
    const sync: number[] = [];
    const loc: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      tag = i === 0 ? '' : 'sync';
      sync.push(await step(pushing, 'sync', i));
      tag = i === 0 ? '' : 'local';
      loc.push(await step(local, 'local', i));
    }
    tag = '';
    console.log(`snapshot+push median ${median(sync.slice(1)).toFixed(0)} ms, snapshot median ${median(loc.slice(1)).toFixed(0)} ms (ratio ${(median(sync.slice(1)) / median(loc.slice(1))).toFixed(2)})`);
    for (const [k, v] of [...phases].sort()) console.log(`${k.padEnd(60)} n=${v.length} median ${median(v).toFixed(1)} ms`);
    await pushing.finish('sync');
    await local.finish('local');
  } finally {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
    for (const i of await docker.listImages({ filters: { label: [`berth.host=${hostId}`] } })) await docker.getImage(i.Id).remove({ force: true }).catch(() => {});
    for (const h of hosts) await h.close().catch(() => {});
    await registry.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
void main();
