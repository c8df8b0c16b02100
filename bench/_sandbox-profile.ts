/**
 * sandbox profile (not a suite): where a warm lease and a 10 MB write + read spend their time.
 * `npx tsx bench/_sandbox-profile.ts`
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createSandboxHost, createWarmPool, type SandboxSpec } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { newId } from '../host/support/ids';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { median } from './_stats';

const docker = await requireEngine();
const imageId = await requireTinyImage(docker);
const dir = mkdtempSync(join(tmpdir(), 'berth-bench-sprof-'));
const store = openSqliteStore(join(dir, 'bench.db'));
const hostId = newId('benchhost');
const host = createSandboxHost({ docker, records: store, clock: systemClock, logger: pino({ level: 'warn' }), hostId });
const spec: SandboxSpec = {
  imageDigest: imageId, imageRef: 'berth/tiny:latest', envFingerprint: 'sha256:' + 'b'.repeat(64),
  workspace: { path: '/workspace', owner: '1000:1000' },
  resources: { cpus: 1, memoryMb: 512, pids: 256, diskMb: 1024, commandTimeoutS: 60 },
  lease: { ttlS: 600, heartbeatS: 60 }, network: { mode: 'none' },
};
const marks: Record<string, number[]> = {};
const mark = (k: string, ms: number) => (marks[k] ??= []).push(ms);
function wrap<T extends object>(obj: T, name: keyof T & string, label: string) {
  const orig = (obj as Record<string, unknown>)[name] as (...a: unknown[]) => unknown;
  (obj as Record<string, unknown>)[name] = function (this: unknown, ...a: unknown[]) {
    const t0 = performance.now();
    const r = orig.apply(this, a);
    if (r instanceof Promise) return r.finally(() => mark(label, performance.now() - t0));
    mark(label, performance.now() - t0);
    return r;
  };
}
try {
  wrap(store, 'insertLease', 'insertLease');
  const pool = createWarmPool(host, spec, { size: 3 });
  const leases = [];
  for (let i = 0; i < 16; i++) {
    await pool.ready();
    const idle = (pool as unknown as { idle: Array<{ container: object }> }).idle;
    for (const p of idle) if (!(p.container as { __w?: boolean }).__w) { wrap(p.container as { inspect: () => unknown }, 'inspect', 'inspect'); (p.container as { __w?: boolean }).__w = true; }
    const t0 = performance.now();
    leases.push(await pool.lease({ sessionId: 'bench', autoHeartbeat: false }));
    mark('pool.lease total', performance.now() - t0);
  }
  await pool.close();
  await Promise.all(leases.map((l) => l.release()));
  // file io phases
  const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
  const data = Buffer.alloc(10 * 1024 * 1024, 7);
  const c = docker.getContainer(lease.containerId) as unknown as Record<string, unknown>;
  wrap(c as { putArchive: () => unknown }, 'putArchive', 'putArchive');
  wrap(c as { getArchive: () => unknown }, 'getArchive', 'getArchive (headers)');
  wrap(c as { infoArchive: () => unknown }, 'infoArchive', 'infoArchive (HEAD)');
  wrap(c as { exec: () => unknown }, 'exec', 'exec create');
  for (let i = 0; i < 8; i++) {
    let t0 = performance.now();
    await lease.writeFile('bench.bin', data);
    mark('writeFile total', performance.now() - t0);
    t0 = performance.now();
    await lease.readFile('bench.bin');
    mark('readFile total', performance.now() - t0);
  }
  await lease.release();
  for (const [k, v] of Object.entries(marks)) console.log(`${k.padEnd(24)} p50 ${median(v.slice(1)).toFixed(2)} ms  (n=${v.length - 1})`);
} finally {
  await host.close();
  const left = await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
