/**
 * sandbox profile (not a suite): where a warm lease and a 10 MB write + read spend their time.
 * `npx tsx bench/_sandbox-profile.ts`
 */
import { createWarmPool } from '../host/sandbox';
import { benchSandbox } from './_bench-sandbox';
import { median } from './_stats';

const sb = await benchSandbox('berth-bench-sprof-');
const { docker, store, host, spec } = sb;
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
  await sb.close();
}
