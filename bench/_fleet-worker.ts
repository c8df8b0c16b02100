/**
 * One worker process of the fleet bench: `node _fleet-worker.mjs STORE TTL_MS CONCURRENCY [HOST_ID]`, STORE
 * a SQLite path or a PostgreSQL URL, HOST_ID the machine it stands for (default `bench`). The same Worker and per-session Kernel as `berth worker`, with
 * the bench's kernel-only task kinds. With BERTH_BENCH_COUNT=FILE it counts its store calls (and
 * the milliseconds spent in each) and writes them to FILE.PID.json when it stops.
 */
import { writeFileSync } from 'node:fs';
import pino from 'pino';
import { Worker } from '../host/fleet';
import { DocumentTypes, HandlerRegistry, Kernel } from '../host/kernel';
import { openStore, type Store } from '../host/store';
import { systemClock } from '../host/support';
import { registerFleetKinds } from './_fleet-kinds';

const [location, ttlArg, concArg, hostArg] = process.argv.slice(2);
const hostId = hostArg ?? 'bench';
const ttl = Number(ttlArg);
const concurrency = Number(concArg);
const countTo = process.env.BERTH_BENCH_COUNT;
const counts: Record<string, { n: number; ms: number }> = {};
const counted = (s: Store): Store =>
  new Proxy(s, {
    get(target, key, recv) {
      const v = Reflect.get(target, key, recv) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const c = (counts[String(key)] ??= { n: 0, ms: 0 });
        c.n++;
        const t0 = performance.now();
        const out = (v as (...a: unknown[]) => unknown).apply(target, args);
        if (out instanceof Promise)
          return out.then((r: unknown) => {
            c.ms += performance.now() - t0;
            // A claim or renewal the store refused: counted apart (contention between workers).
            if (r === false || (r !== null && typeof r === 'object' && (r as { ok?: unknown }).ok === false)) {
              (counts[`${String(key)}:refused`] ??= { n: 0, ms: 0 }).n++;
              const owner = (r as { owner?: { pid: number | null; stoppedAt: number | null } }).owner;
              if (owner) (counts[`${String(key)}:refused-by-${owner.pid === process.pid ? 'self' : owner.stoppedAt !== null ? 'stopped' : 'other'}`] ??= { n: 0, ms: 0 }).n++;
            }
            return r;
          });
        c.ms += performance.now() - t0;
        return out;
      };
    },
  });
const raw = await openStore(location!);
const store = countTo ? counted(raw) : raw;
const registry = new HandlerRegistry();
registerFleetKinds(registry);
const logger = pino({ level: process.env.BERTH_BENCH_LOG ?? 'silent' }, pino.destination(2));
// Faster timers than `berth worker`'s (the kernel's default poll 500 ms, a claim round at
// min(1 s, TTL/3)): an idle worker makes ~75 store transactions a second here, ~4 with the CLI's.
// BERTH_BENCH_POLL_MS / BERTH_BENCH_CLAIM_MS replace them (e.g. 500 and 1000, as the CLI).
const pollMs = Number(process.env.BERTH_BENCH_POLL_MS ?? 100);
const claimEveryMs = Number(process.env.BERTH_BENCH_CLAIM_MS ?? 50);
const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger, hostId, claim: 'none', concurrency: concurrency * 2, pollMs, heartbeatMs: Math.floor(ttl / 3), ownership: { leaseTtlMs: ttl } });
const worker = new Worker({ store, kernel, logger, hostId, pid: process.pid, concurrency, tags: [], leaseTtlMs: ttl, claimEveryMs });
process.once('SIGTERM', () => {
  if (countTo) writeFileSync(`${countTo}.${process.pid}.json`, JSON.stringify(counts));
  void worker.drain(0).then(() => store.close()).then(() => process.exit(0));
});
// `ready` once the process is loaded and its store open; the work starts at the `go` line on stdin,
// so several workers start together (the bench's first worker drove most of the runs while the
// others were still loading, on the same cores, and its figures counted that as N workers' work).
process.stdout.write('ready\n');
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
await worker.start();
process.stdout.write('started\n');
