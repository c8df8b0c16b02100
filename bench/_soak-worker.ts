/**
 * Soak of an in-process fleet worker (the `berth worker` path: startWorker over assembled parts)
 * driving N one-step plan runs one after another, as an operator's worker does for days:
 *   node --expose-gc --import tsx bench/_soak-worker.ts [N=150] [sqlite|postgres]
 * (postgres: a database of test/support's cluster; samples then count its connections too.)
 * Every 25 runs: heap after gc, RSS, open fds, active handles/resources, process listeners,
 * containers and networks of this host id left on the engine, unreleased leases.
 * SOAK_HEAPSNAP=DIR also writes heap snapshots after 25 runs and after the last.
 */
import { processFigures } from './_soak-probe';
import { writeHeapSnapshot } from 'node:v8';
import { Berth } from '../host/index';
import { assemble } from '../host/api/assemble';
import { startWorker } from '../host/api/worker';
import { isFinalRunState } from '../host/model';
import { planFixture } from '../test/support/plan-fixture';
import { newStoreLocation, stopSharedPostgres } from '../test/support/store-kinds';
import { openPostgresStore } from '../host/store';

const n = Number(process.argv[2] ?? 150);
const pgUrl = process.argv[3] === 'postgres' ? (await newStoreLocation('postgres')).location : undefined;
const fx = await planFixture([{ name: 'one', run: 'echo one' }], { README: 'x\n' }, pgUrl ? { store: pgUrl } : {});
// Another handle on the database, to count the connections the worker holds (pg_stat_activity).
const watcher = pgUrl ? await openPostgresStore(pgUrl) : undefined;
const pgConnections = async () => {
  if (!watcher) return undefined;
  const pool = (watcher as unknown as { pool: { query(t: string): Promise<{ rows: Array<{ n: number }> }> } }).pool;
  return Number((await pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()')).rows[0]!.n) - 1;
};
process.env.BERTH_HOST_ID = fx.hostId;
const parts = assemble({ store: fx.store, hostId: fx.hostId, logger: (await import('pino')).default({ level: 'silent' }) });
const berth = Berth.from(parts);
const worker = await startWorker(parts, { concurrency: 2 });
const procListeners = () => process.eventNames().reduce((k, e) => k + process.listenerCount(e), 0);
async function engine() {
  const label = [`berth.host=${fx.hostId}`];
  const containers = (await fx.docker.listContainers({ all: true, filters: { label } })).length;
  const networks = (await fx.docker.listNetworks({ filters: { label } })).length;
  return { containers, networks };
}
async function sample(i: number, t0: number) {
  const figures = await processFigures(50);
  const leases = (await parts.store.listLeases({ unreleased: true })).length;
  console.log(JSON.stringify({ runs: i, ...figures, procListeners: procListeners(), leases, pgConnections: await pgConnections(), ...(await engine()), msPerRun: i ? Math.round((Date.now() - t0) / i) : 0 }));
}
const t0 = Date.now();
await sample(0, t0);
for (let i = 1; i <= n; i++) {
  const { run } = await berth.submitPlan(fx.plan, { requestId: `soak-${i}` });
  for (;;) {
    const r = await parts.store.getRun(run.id);
    if (r && isFinalRunState(r.state)) {
      if (r.state !== 'completed') console.log('run', i, r.state);
      break;
    }
    await new Promise((res) => setTimeout(res, 20));
  }
  if (i % 25 === 0) await sample(i, t0);
  // SOAK_HEAPSNAP=DIR: heap snapshots after 25 runs and after the last, for bench/_soak-heapdiff.ts.
  if (process.env.SOAK_HEAPSNAP && (i === 25 || i === n)) writeHeapSnapshot(`${process.env.SOAK_HEAPSNAP}/worker-${i}.heapsnapshot`);
}
await worker.drain(5000);
await sample(n, t0);
await parts.store.close();
await fx.cleanup();
await watcher?.close();
if (pgUrl) await stopSharedPostgres();
