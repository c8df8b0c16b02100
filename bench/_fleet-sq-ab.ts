/**
 * A/B of the SQLite worker-scaling figure: `npx tsx bench/_fleet-sq-ab.ts ROUNDS A.ts B.ts`, each a
 * `_fleet-worker.ts` entry (e.g. one whose `../host` is another checkout's). As _fleet-pg-ab.ts, on
 * a fresh SQLite file per measurement: alternates A and B with 1 then 2 workers (`BENCH_WORKERS`),
 * ROUNDS times, printing each measurement with the load, and the best of each.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { throughput, type Scaling } from './_fleet-scaling';

const [roundsArg, ...entries] = process.argv.slice(2);
const scripts: string[] = [];
for (const [i, entry] of entries.entries()) {
  const outfile = join(process.cwd(), 'node_modules', '.cache', 'berth-scripts', `fleet-sq-ab-${i}-${process.pid}.mjs`);
  await build({ entryPoints: [entry], outfile, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'error' });
  scripts.push(outfile);
}
const dir = mkdtempSync(join(tmpdir(), 'berth-fleet-sq-ab-'));
const best = new Map<string, Scaling>();
const fmt = (s: Scaling) => `${s.runsPerSecond.toFixed(1)} runs/s, workers ${s.workerCores.map((c) => c.toFixed(2)).join(' + ')} cores`;
try {
  for (let round = 0; round < Number(roundsArg); round++) {
    for (const n of (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number)) {
      for (const [i, script] of scripts.entries()) {
        const s = await throughput(script, join(mkdtempSync(join(dir, 'db-')), 'fleet.db'), n);
        const key = `${'AB'[i]} ${n}w`;
        console.log(`round ${round + 1} ${key}: ${fmt(s)}   (load ${loadavg()[0]!.toFixed(1)})`);
        if (!best.has(key) || best.get(key)!.runsPerSecond < s.runsPerSecond) best.set(key, s);
      }
    }
  }
  for (const [key, s] of [...best].sort()) console.log(`best ${key}: ${fmt(s)}`);
  for (const side of ['A', 'B'].slice(0, scripts.length)) {
    const one = best.get(`${side} 1w`)!.runsPerSecond;
    console.log(`${side} ` + [2, 3].filter((n) => best.has(`${side} ${n}w`)).map((n) => `${n}_vs_one = ${(best.get(`${side} ${n}w`)!.runsPerSecond / one).toFixed(2)}x`).join(', '));
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
