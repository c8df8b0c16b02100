/**
 * Where a worker-driven run's time goes: `npx tsx bench/_fleet-trace.ts [N_WORKERS,...]`. Runs the
 * fleet bench's 200 short runs on a throwaway PostgreSQL cluster with each worker count, then reads
 * every run's commits back and prints medians of the gaps: submit -> first commit under a worker,
 * between the run's commits, and, per slot, a run's last commit -> the next run's first commit.
 */
import { join } from 'node:path';
import { openStore } from '../host/store';
import { startPostgres } from '../test/support/postgres';
import { bundleScript } from '../test/support/bundle-script';
import { postmasterPid } from './_fleet-cpu';
import { throughput } from './_fleet-scaling';

const med = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
};
const p90 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length * 0.9)]! : NaN;
};

const cluster = await startPostgres();
const script = await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts'));
try {
  for (const n of (process.argv[2] ?? '1,2').split(',').map(Number)) {
    const url = await cluster.createDatabase('trace');
    const s = await throughput(script, url, n, postmasterPid(cluster.port));
    const store = await openStore(url);
    const gaps = new Map<string, number[]>();
    const add = (k: string, v: number) => (gaps.get(k) ?? gaps.set(k, []).get(k)!).push(v);
    const runs: Array<{ first: number; last: number }> = [];
    for (const run of await store.listRuns({})) {
      const commits = await store.listCommits(run.sessionId);
      const worked = commits.filter((c) => c.actor !== 'host:bench-submit' && !c.label.startsWith('submit'));
      if (worked.length === 0) continue;
      add('submit -> first worker commit', worked[0]!.at - commits[0]!.at);
      for (let i = 1; i < worked.length; i++) add(`${worked[i - 1]!.label} -> ${worked[i]!.label}`, worked[i]!.at - worked[i - 1]!.at);
      runs.push({ first: worked[0]!.at, last: worked.at(-1)!.at });
    }
    // Slot turnover over all workers (they share one host id): with C slots in all, the k-th run
    // start after the first C follows the (k-C)-th run end.
    const ends = runs.map((r) => r.last).sort((a, b) => a - b);
    const starts = runs.map((r) => r.first).sort((a, b) => a - b);
    const slots = 8 * n;
    for (let k = slots; k < starts.length; k++) add('slot: end -> next start', starts[k]! - ends[k - slots]!);
    for (const r of runs) add('run: first -> last commit', r.last - r.first);
    console.log(`\n== ${n} worker(s): ${s.runsPerSecond.toFixed(1)} runs/s, workers ${s.workerCores.map((x) => x.toFixed(2)).join(' + ')} cores, server ${s.serverCores?.toFixed(2)}`);
    for (const [k, v] of gaps) console.log(`  ${k}: median ${med(v).toFixed(1)} ms, p90 ${p90(v).toFixed(1)} ms (${v.length})`);
    await store.close();
  }
} finally {
  await cluster.stop();
}
