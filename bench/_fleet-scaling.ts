/** The worker-scaling figures of the fleet suite, for both stores (and the processes they start). */
import { spawn, type ChildProcess } from 'node:child_process';
import pino from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../host/kernel';
import { openStore } from '../host/store';
import { systemClock } from '../host/support';
import { registerFleetKinds } from './_fleet-kinds';
import { cpuSeconds, serverCpuSeconds } from './_fleet-cpu';
import type { Report } from './run';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function submitRuns(location: string, kind: string, n: number): Promise<string[]> {
  const store = await openStore(location);
  const registry = new HandlerRegistry();
  registerFleetKinds(registry);
  // Unstarted, per-session: it only writes submissions (which create their sessions, unfenced).
  const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'bench-submit', claim: 'none' });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await submit({ store, kernel, registry }, { requestId: `r${i}`, runKind: 'bench', root: { kind, input: {} } })).run.id);
  await store.close();
  return ids;
}

/**
 * A worker process of `script` (bench/_fleet-worker.ts bundled), its store open; it starts working
 * at once, or, `held`, at {@link go}.
 */
export async function startWorker(script: string, location: string, ttl: number, concurrency: number, hostId = 'bench', held = false): Promise<ChildProcess> {
  // BERTH_BENCH_WORKER_PROF=DIR: each worker writes a V8 CPU profile there (where a run's CPU goes);
  // BERTH_BENCH_WORKER_NODE: the program started instead of node (a wrapper such as strace).
  const prof = process.env.BERTH_BENCH_WORKER_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BERTH_BENCH_WORKER_PROF] : [];
  const child = spawn(process.env.BERTH_BENCH_WORKER_NODE ?? process.execPath, [...prof, script, location, String(ttl), String(concurrency), hostId], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
  if (!held) go([child]);
  return child;
}

/** Held workers ({@link startWorker}) start working, all in the same moment. */
export function go(children: ChildProcess[]): void {
  for (const c of children) c.stdin!.write('go\n');
}

export const stopAll = async (children: ChildProcess[]) => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode !== null || c.signalCode !== null ? undefined : new Promise((r) => c.once('exit', r)))));
};

const RUNS = 200;

/** One measurement of {@link throughput}: runs/s, and the CPU each worker (and the server) used, as cores busy over the same wall time. */
export interface Scaling {
  runsPerSecond: number;
  workerCores: number[];
  serverCores: number | null;
}

/**
 * `workers` processes (8 sessions each) driving {@link RUNS} short runs (3 phases) to the end:
 * runs/s from the first worker commit to the last run's completion (store times, so process
 * start-up is not counted), and each process's CPU over that time.
 */
export async function throughput(script: string, location: string, workers: number, postmaster?: number): Promise<Scaling> {
  const ids = await submitRuns(location, 'fleet-short', RUNS);
  const reader = await openStore(location);
  const children: ChildProcess[] = [];
  const wall0 = performance.now();
  const server0 = postmaster ? serverCpuSeconds(postmaster) : 0;
  try {
    // Held until all are loaded: a worker that starts alone drives runs while the others load.
    children.push(...(await Promise.all(Array.from({ length: workers }, () => startWorker(script, location, 5000, 8, 'bench', true)))));
    const cpu0 = children.map((c) => cpuSeconds(c.pid!));
    const ready = performance.now();
    go(children);
    while ((await reader.listRuns({ states: ['completed'] })).length < ids.length) await sleep(100);
    const wall = (performance.now() - ready) / 1000;
    const workerCores = children.map((c, i) => (cpuSeconds(c.pid!) - cpu0[i]!) / wall);
    const serverCores = postmaster ? (serverCpuSeconds(postmaster) - server0) / ((performance.now() - wall0) / 1000) : null;
    let first = Infinity;
    let last = 0;
    for (const id of ids) {
      const transitions = await reader.listRunTransitions(id);
      first = Math.min(first, transitions.find((t) => t.to === 'running')!.at);
      last = Math.max(last, transitions.at(-1)!.at);
    }
    return { runsPerSecond: ids.length / ((last - first) / 1000), workerCores, serverCores };
  } finally {
    await stopAll(children);
    await reader.close();
  }
}

/**
 * `PREFIXtwo_workers_vs_one` and `PREFIXthree_workers_vs_one`: the same {@link RUNS} runs driven
 * by 2 and 3 worker processes vs by one, each on a fresh store from `location`, with the CPU of
 * each worker (cores busy: CPU seconds per wall second) printed beside it.
 */
export async function workersVsOne(report: Report, script: string, prefix: string, location: () => Promise<string>, postmaster?: number): Promise<void> {
  // Alternating rounds (1, 2, 3, 1, 2, 3 workers) spread the machine's noise over every count; the
  // best round of each count is kept, as the other suites do.
  const by = new Map<number, Scaling>();
  for (let round = 0; round < 2; round++) {
    for (const n of [1, 2, 3]) {
      const s = await throughput(script, await location(), n, postmaster);
      if (!by.has(n) || by.get(n)!.runsPerSecond < s.runsPerSecond) by.set(n, s);
    }
  }
  for (const [n, s] of by) {
    const name = `${['one', 'two', 'three'][n - 1]!}_worker${n > 1 ? 's' : ''}`;
    report(`${prefix}${name}_runs_per_s`, s.runsPerSecond, 'absolute');
    s.workerCores.forEach((c, i) => report(`${prefix}${name}_cpu_cores_w${i + 1}`, c, 'absolute'));
    if (s.serverCores !== null) report(`${prefix}${name}_server_cpu_cores`, s.serverCores, 'absolute');
  }
  report(`${prefix}two_workers_vs_one`, by.get(2)!.runsPerSecond / by.get(1)!.runsPerSecond, 'ratio');
  report(`${prefix}three_workers_vs_one`, by.get(3)!.runsPerSecond / by.get(1)!.runsPerSecond, 'ratio');
}
