/**
 * What a fleet-bench worker costs while it has nothing to do: `npx tsx bench/_fleet-idle.ts [N] [SECONDS]`
 * starts N workers on an empty database of a throwaway PostgreSQL cluster and prints each
 * worker's and the server's CPU (cores) and the server's transactions per second over SECONDS.
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openStore } from '../host/store';
import { startPostgres } from '../test/support/postgres';
import { bundleScript } from '../test/support/bundle-script';
import { cpuSeconds, postmasterPid, serverCpuSeconds } from './_fleet-cpu';
import { sleep, startWorker, stopAll } from './_fleet-scaling';

const n = Number(process.argv[2] ?? 1);
const seconds = Number(process.argv[3] ?? 5);
const cluster = await startPostgres();
const script = process.argv[4] ?? (await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts')));
const pm = postmasterPid(cluster.port)!;
try {
  const url = await cluster.createDatabase('idle');
  await (await openStore(url)).close();
  const children = await Promise.all(Array.from({ length: n }, () => startWorker(script, url, 5000, 8)));
  await sleep(1000);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const xacts = async () => Number((await admin.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n);
  const x0 = await xacts();
  const c0 = children.map((c) => cpuSeconds(c.pid!));
  const s0 = serverCpuSeconds(pm);
  await sleep(seconds * 1000);
  const x1 = await xacts();
  console.log(`${n} idle worker(s), load ${loadavg()[0]!.toFixed(1)}: workers ${children.map((c, i) => ((cpuSeconds(c.pid!) - c0[i]!) / seconds).toFixed(3)).join(' + ')} cores, server ${((serverCpuSeconds(pm) - s0) / seconds).toFixed(3)} cores, ${((x1 - x0) / seconds).toFixed(0)} transactions/s`);
  await admin.end();
  await stopAll(children);
} finally {
  await cluster.stop();
}
