/**
 * A/B of the PostgreSQL worker-scaling figure: `npx tsx bench/_fleet-pg-ab.ts ROUNDS A.ts B.ts`,
 * each a `_fleet-worker.ts` entry (e.g. one whose `../host` is another checkout's). Alternates
 * A and B with 1 then 2 workers (`BENCH_WORKERS=1,2,3`: those counts) on one throwaway cluster, ROUNDS times, printing each measurement
 * (runs/s, each worker's CPU, the server's) and the best of each.
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { startPostgres } from '../test/support/postgres';
import { postmasterPid } from './_fleet-cpu';
import { throughput, type Scaling } from './_fleet-scaling';

const [roundsArg, ...entries] = process.argv.slice(2);
const scripts: string[] = [];
for (const [i, entry] of entries.entries()) {
  const outfile = join(process.cwd(), 'node_modules', '.cache', 'berth-scripts', `fleet-ab-${i}-${process.pid}.mjs`);
  await build({ entryPoints: [entry], outfile, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'error' });
  scripts.push(outfile);
}
const cluster = await startPostgres();
const postmaster = postmasterPid(cluster.port);
const best = new Map<string, Scaling>();
const fmt = (s: Scaling) => `${s.runsPerSecond.toFixed(1)} runs/s, workers ${s.workerCores.map((c) => c.toFixed(2)).join(' + ')} cores, server ${s.serverCores?.toFixed(2)}`;
try {
  for (let round = 0; round < Number(roundsArg); round++) {
    for (const n of (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number)) {
      for (const [i, script] of scripts.entries()) {
        const s = await throughput(script, await cluster.createDatabase('ab'), n, postmaster);
        const key = `${'AB'[i]} ${n}w`;
        console.log(`round ${round + 1} ${key}: ${fmt(s)}   (load ${loadavg()[0]!.toFixed(1)})`);
        if (!best.has(key) || best.get(key)!.runsPerSecond < s.runsPerSecond) best.set(key, s);
      }
    }
  }
  for (const [key, s] of [...best].sort()) console.log(`best ${key}: ${fmt(s)}`);
  for (const side of ['A', 'B'].slice(0, scripts.length)) console.log(`${side} two_workers_vs_one = ${(best.get(`${side} 2w`)!.runsPerSecond / best.get(`${side} 1w`)!.runsPerSecond).toFixed(2)}x`);
} finally {
  await cluster.stop();
}
