/**
 * Context switches per run of the fleet bench on PostgreSQL: `npx tsx bench/_fleet-ctx.ts [N,...] [WORKER_SCRIPT]`.
 * Samples every worker process's and server process's voluntary / involuntary switches (/proc/PID/status)
 * while the fleet bench's 200 short runs go, and prints them per run beside runs/s and CPU.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startPostgres } from '../test/support/postgres';
import { bundleScript } from '../test/support/bundle-script';
import { postmasterPid } from './_fleet-cpu';
import { throughput } from './_fleet-scaling';

function switches(pid: number): [number, number] | null {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    return [Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(s)![1]), Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(s)![1])];
  } catch {
    return null;
  }
}
function kind(pid: number, postmaster: number, script: string): 'server' | 'worker' | null {
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (cmd.includes(script)) return 'worker';
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster || pid === postmaster ? 'server' : null;
  } catch {
    return null;
  }
}
const cluster = await startPostgres();
const script = process.argv[3] ?? (await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts')));
const postmaster = postmasterPid(cluster.port)!;
try {
  for (const n of (process.argv[2] ?? '1,2').split(',').map(Number)) {
    const first = new Map<number, [number, number]>();
    const last = new Map<number, [number, number]>();
    const kinds = new Map<number, 'server' | 'worker'>();
    let on = true;
    const sys0 = Number(/ctxt (\d+)/.exec(readFileSync('/proc/stat', 'utf8'))![1]);
    const sampler = (async () => {
      while (on) {
        for (const name of readdirSync('/proc')) {
          if (!/^\d+$/.test(name)) continue;
          const pid = Number(name);
          const k = kinds.get(pid) ?? kind(pid, postmaster, script);
          if (!k) continue;
          kinds.set(pid, k);
          const s = switches(pid);
          if (!s) continue;
          if (!first.has(pid)) first.set(pid, s);
          last.set(pid, s);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const s = await throughput(script, await cluster.createDatabase('ctx'), n, postmaster);
    on = false;
    await sampler;
    const sys1 = Number(/ctxt (\d+)/.exec(readFileSync('/proc/stat', 'utf8'))![1]);
    const sum = (k: string, i: number) => [...last].filter(([p]) => kinds.get(p) === k).reduce((a, [p, v]) => a + v[i]! - first.get(p)![i]!, 0) / 200;
    console.log(`${n} worker(s): ${s.runsPerSecond.toFixed(1)} runs/s, workers ${s.workerCores.map((c) => c.toFixed(2)).join(' + ')} cores, server ${s.serverCores?.toFixed(2)}; per run: worker switches vol ${sum('worker', 0).toFixed(1)} invol ${sum('worker', 1).toFixed(1)}, server vol ${sum('server', 0).toFixed(1)} invol ${sum('server', 1).toFixed(1)}, system ${((sys1 - sys0) / 200).toFixed(0)}`);
  }
} finally {
  await cluster.stop();
}
