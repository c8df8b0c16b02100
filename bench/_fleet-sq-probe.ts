/**
 * Store calls per run of the fleet bench's workers on SQLite: `npx tsx bench/_fleet-sq-probe.ts [N,...] [WORKER_SCRIPT]`.
 * The fleet bench's 200 short runs on a fresh SQLite file per worker count, each worker counting its
 * store calls and the milliseconds spent in each (BERTH_BENCH_COUNT in _fleet-worker.ts): printed per
 * run, the costliest first. A synchronous call's time there is time its whole process was held.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleScript } from '../test/support/bundle-script';
import { throughput } from './_fleet-scaling';
const script = process.argv[3] ?? (await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts')));
const dir = mkdtempSync(join(tmpdir(), 'sqprobe-'));
for (const n of (process.argv[2] ?? '1,2').split(',').map(Number)) {
  const prefix = join(dir, `n${n}-${Date.now()}`);
  process.env.BERTH_BENCH_COUNT = prefix;
  const s = await throughput(script, join(mkdtempSync(join(dir, 'db-')), 'fleet.db'), n);
  console.log(`\n== ${n}: ${s.runsPerSecond.toFixed(1)} runs/s, workers ${s.workerCores.map((c) => c.toFixed(2)).join(' + ')}`);
  for (const f of readdirSync(dir).filter((f) => f.startsWith(prefix.split('/').at(-1)!))) {
    const c = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Record<string, { n: number; ms: number }>;
    console.log('  ' + Object.entries(c).sort((a, b) => b[1].ms - a[1].ms).slice(0, 12).map(([k, v]) => `${k} ${(v.n / 200).toFixed(2)}/run ${(v.ms / v.n).toFixed(2)}ms tot${v.ms.toFixed(0)}`).join(', '));
  }
}
