/**
 * When each worker process of the fleet bench became ready, against when the runs ran:
 * `npx tsx bench/_fleet-start.ts [N_WORKERS,...]` (a throwaway PostgreSQL cluster). Shows whether
 * the first worker drove runs while the others were still starting (node + bundle load on the
 * same cores), which `throughput` counts as the N-worker figure.
 */
import { join } from 'node:path';
import { openStore } from '../host/store';
import { startPostgres } from '../test/support/postgres';
import { bundleScript } from '../test/support/bundle-script';
import { cpuSeconds } from './_fleet-cpu';
import { sleep, startWorker, stopAll, submitRuns } from './_fleet-scaling';

const cluster = await startPostgres();
const script = await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts'));
try {
  for (const n of (process.argv[2] ?? '1,2,3').split(',').map(Number)) {
    const url = await cluster.createDatabase('start');
    const ids = await submitRuns(url, 'fleet-short', 200);
    const reader = await openStore(url);
    const t0 = Date.now();
    const ready: number[] = [];
    const children = await Promise.all(Array.from({ length: n }, async () => { const c = await startWorker(script, url, 5000, 8); ready.push(Date.now() - t0); return c; }));
    const cpuAtReady = children.map((c) => cpuSeconds(c.pid!));
    while ((await reader.listRuns({ states: ['completed'] })).length < ids.length) await sleep(100);
    const doneSeen = Date.now() - t0;
    let first = Infinity, last = 0;
    for (const id of ids) {
      const tr = await reader.listRunTransitions(id);
      first = Math.min(first, tr.find((t) => t.to === 'running')!.at);
      last = Math.max(last, tr.at(-1)!.at);
    }
    // Who ran what: each session's last claim (its pid and when), per worker process.
    const owners = await reader.listSessionOwners();
    const byPid = new Map<number, number[]>();
    for (const o of owners) (byPid.get(o.pid!) ?? byPid.set(o.pid!, []).get(o.pid!)!).push(o.takenAt - t0);
    const who = children.map((c) => { const at = (byPid.get(c.pid!) ?? []).sort((a, b) => a - b); return `${at.length} runs from ${at[0] ?? '-'} ms`; }).join('; ');
    console.log(`${n}w: ${who}`);
    console.log(`${n}w: ready at ${ready.join(', ')} ms; runs from ${first - t0} to ${last - t0} ms (${(200 / ((last - first) / 1000)).toFixed(1)} runs/s); all completed seen at ${doneSeen} ms; CPU at ready ${cpuAtReady.map((x) => x.toFixed(2)).join(', ')} s, at end ${children.map((c) => cpuSeconds(c.pid!).toFixed(2)).join(', ')} s`);
    await stopAll(children);
    await reader.close();
  }
} finally {
  await cluster.stop();
}
