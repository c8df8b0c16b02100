/**
 * One sandbox, the same command run alternately through the lease's exec (the wrapper, the usage
 * meter, live output: what a plan step gets) and as a plain engine exec of the same container:
 * per side, the median wall and the container's CPU time per command (a profiling tool, not a figure).
 * Usage: tsx bench/_plan-exec-ab.ts WORKSPACE_DIR 'SETUP' 'COMMAND' [ROUNDS]
 */
import { readFileSync } from 'node:fs';
import Dockerode from 'dockerode';
import pino from 'pino';
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parseEnvironment } from '../environment';
import { SandboxHost } from '../host/sandbox';
import { cgroupCounters } from '../host/sandbox/cgroup-counters';
import { sandboxSpecOf } from '../host/runtime/sandbox-spec';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { median } from './_stats';

const [ws, setup, command, roundsArg] = process.argv.slice(2) as [string, string, string, string?];
const docker = new Dockerode();
const tmp = mkdtempSync(join(tmpdir(), 'exec-ab-'));
const store = openSqliteStore(join(tmp, 's.db'));
const hostId = `bench-exec-ab-${process.pid}`;
const sandbox = new SandboxHost({ docker, records: store, clock: systemClock, logger: pino({ level: 'warn' }), hostId });
const digest = (await docker.getImage('berth/dev:latest').inspect()).Id;
const env = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }
image: { ref: "berth/dev:latest", digest: "${digest}" }
workspace: { path: /workspace, owner: "1000:1000" }
network: { mode: none }
resources: { cpus: 2, memoryMb: 2048, pids: 512, diskMb: 4096, commandTimeoutS: 900 }
`, join(tmp, 'env.yaml'));
const lease = await sandbox.lease(sandboxSpecOf(env), { sessionId: 'ab', runId: 'ab', signal: AbortSignal.timeout(120_000) });
const c = docker.getContainer(lease.containerId);
const rows = new Map<string, number[]>();
const add = (k: string, v: number) => rows.set(k, [...(rows.get(k) ?? []), v]);
try {
  await lease.uploadDir(ws, '/workspace');
  const s = await lease.exec(['sh', '-c', setup], { timeoutMs: 600_000 });
  if (s.exitCode !== 0) throw new Error(`setup failed: ${s.stderr}`);
  const berth = async () => {
    const cpu0 = (await cgroupCounters(c))!.cpuNs;
    let bytes = 0;
    const r = await lease.exec(['sh', '-c', command], { timeoutMs: 600_000, measure: true, onOutput: (_s, chunk) => (bytes += chunk.length) });
    if (r.exitCode !== 0) throw new Error(`berth side failed: ${r.stderr}`);
    add('lease.exec wall', r.durationMs);
    add('lease.exec sandbox cpu', ((await cgroupCounters(c))!.cpuNs - cpu0) / 1e6);
  };
  const raw = async () => {
    const cpu0 = (await cgroupCounters(c))!.cpuNs;
    const t0 = performance.now();
    const exec = await c.exec({ Cmd: ['sh', '-c', command], User: '1000:1000', WorkingDir: '/workspace', AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({});
    await new Promise<void>((res, rej) => stream.on('end', res).on('error', rej).resume());
    if ((await exec.inspect()).ExitCode !== 0) throw new Error('raw side failed');
    add('raw exec wall', performance.now() - t0);
    add('raw exec sandbox cpu', ((await cgroupCounters(c))!.cpuNs - cpu0) / 1e6);
  };
  const rounds = Number(roundsArg ?? 6);
  for (let i = 0; i < rounds; i++) {
    if (i % 2) (await berth(), await raw());
    else (await raw(), await berth());
  }
  console.log(`# load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  for (const [k, v] of [...rows].sort(([a], [b]) => a.localeCompare(b))) console.log(`${k}: ${median(v).toFixed(0)} ms  (${v.map((x) => x.toFixed(0)).join(' ')})`);
} finally {
  await lease.release();
  await sandbox.close();
  await store.close();
  rmSync(tmp, { recursive: true, force: true });
}
