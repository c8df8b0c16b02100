/**
 * long: what a run's length costs (issue 32). Plans of N steps `echo $i` in berth/tiny, network
 * none, driven by `berth run --json` as a user runs it (a child process; progress events read as
 * they arrive and time-stamped here).
 *
 * - rss_3000_vs_100_steps: the CLI's peak RSS (VmHWM, read every 50 ms) over a 3,000-step run
 *   vs a 100-step run. Target <= 1.2x.
 * - step_ms_last_vs_first_100: in the 3,000-step run, the median gap between consecutive
 *   `step-end` events over the last 100 steps vs over the first 100. Target <= 1.1x.
 * - exit_after_last_step_ms: a 1,000-step run, from its last `step-end` event to the process exit
 *   (the run end: release, retention, the summary). Reported; the goal (<= 1,000) is issue 32 item 2.
 * - export_rss_mb: peak RSS of `berth export RUN --out FILE` of the 3,000-step run. Target <= 100.
 * - run_page_kb: bytes of GET /runs/RUN (the web view, `berth serve` in this process) of the
 *   3,000-step run. Target <= 300.
 *
 * `BENCH_LONG_STEPS` (default 3000) sets the long run's size and `BENCH_LONG_EXIT_STEPS` (default
 * 1000) the exit run's, for quick runs; figures are named for the full size whatever the size.
 * `BENCH_LONG_KEEP=1` keeps the temp dir (its stores) and prints where it is. Every command is
 * started as a user's `berth` starts it: the bin file itself (up to session 19: `node bin.mjs`,
 * which skips the node flags on the bin's first line); `BENCH_LONG_NODE_ARGS="..."` starts
 * `node ... bin.mjs` instead.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalArtifactStore } from '../host/artifacts';
import { describeRun } from '../host/cli/commands/runs';
import { RUN_PAGE_NEWEST } from '../host/cli/commands/serve';
import { startServe } from '../host/serve';
import { openSqliteStore } from '../host/store';
import { newId } from '../host/support';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { removeHostArtifacts } from '../test/support/plan-fixture';
import type { Report } from './run';
import { median } from './_stats';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'host/cli/bin.mjs');
const LONG = Number(process.env.BENCH_LONG_STEPS ?? 3000);
const EXIT = Number(process.env.BENCH_LONG_EXIT_STEPS ?? 1000);
const SHORT = Math.min(100, LONG);

const hwmKb = (pid: number): number => {
  try {
    return Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0; // gone
  }
};

interface Measured {
  code: number;
  stdout: string;
  stderrTail: string;
  peakRssMb: number;
  /** performance.now() at each line of stdout that parsed as a `step-end` event, and at exit. */
  stepEnds: number[];
  exitAt: number;
}

/** Runs the CLI, reading its VmHWM every 50 ms and time-stamping `step-end` events as they arrive. */
function measure(args: string[], env: Record<string, string>, keepStdout = false): Promise<Measured> {
  // The bin itself, as `berth` runs it (its first line gives node the flags the command runs with);
  // BENCH_LONG_NODE_ARGS runs `node ARGS bin` instead, for comparing node flags.
  const nodeArgs = process.env.BENCH_LONG_NODE_ARGS?.split(' ');
  const child = spawn(nodeArgs ? process.execPath : cli, nodeArgs ? [...nodeArgs, cli, ...args] : args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let peak = 0;
  const poll = setInterval(() => (peak = Math.max(peak, hwmKb(child.pid!))), 50);
  const stepEnds: number[] = [];
  let stdout = '';
  let partial = '';
  let stderrTail = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    if (keepStdout) stdout += d;
    const lines = (partial + d).split('\n');
    partial = lines.pop()!;
    for (const l of lines) if (l.startsWith('{"event":{"type":"step-end"')) stepEnds.push(performance.now());
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderrTail = (stderrTail + d).slice(-4000)));
  return new Promise((resolve) =>
    child.on('close', (code) => {
      const exitAt = performance.now();
      clearInterval(poll);
      resolve({ code: code ?? -1, stdout, stderrTail, peakRssMb: peak / 1024, stepEnds, exitAt });
    }),
  );
}

function writePlan(dir: string, steps: number): string {
  const file = join(dir, `plan-${steps}.yaml`);
  const lines = Array.from({ length: steps }, (_, i) => `  - { name: s${i}, run: "echo ${i}", replay: safe }`);
  writeFileSync(file, `name: long-${steps}\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${lines.join('\n')}\n`);
  return file;
}

async function runPlan(dir: string, steps: number, hostId: string): Promise<Measured & { runId: string; store: string }> {
  const store = join(dir, `run-${steps}.db`);
  const m = await measure(['run', writePlan(dir, steps), '--store', store, '--json'], { BERTH_HOST_ID: hostId }, false);
  if (m.code !== 0) throw new Error(`berth run of ${steps} steps exited ${m.code}: ${m.stderrTail}`);
  if (m.stepEnds.length !== steps) throw new Error(`berth run of ${steps} steps reported ${m.stepEnds.length} step ends`);
  const s = openSqliteStore(store);
  try {
    const runs = await s.listRuns();
    return { ...m, runId: runs[0]!.id, store };
  } finally {
    await s.close();
  }
}

const gaps = (at: number[], from: number, to: number) => at.slice(from + 1, to).map((t, i) => t - at[from + i]!);

export async function runPageKb(storePath: string, runId: string): Promise<number> {
  const reader = openSqliteStore(storePath);
  const token = 'l'.repeat(64);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-long-art-'));
  const server = await startServe(
    {
      store: reader,
      describe: (id) => describeRun(reader, id, { newest: RUN_PAGE_NEWEST }),
      ownerLine: async (run) => run.state,
      actions: { approve: async () => '', deny: async () => '', cancel: async () => '', reconcile: async () => '', judge: async () => '', fork: async () => ({ said: '', forkRunId: null }) },
      artifacts: new LocalArtifactStore(join(dir, 'artifacts')),
      operator: 'user:bench',
      token,
    },
    { host: '127.0.0.1', port: 0 },
  );
  try {
    const res = await fetch(`${server.url}/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } });
    const body = await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`run page answered ${res.status}`);
    return body.byteLength / 1024;
  } finally {
    await server.close();
    await reader.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export default async function longBench(report: Report): Promise<void> {
  const docker = await requireEngine();
  const image = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-long-'));
  const hostId = newId('benchlong');
  console.log(`# long: ${LONG} and ${SHORT} steps (rss, step time, export, page), ${EXIT} steps (exit); load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  try {
    mkdirSync(join(dir, 'ws'));
    writeFileSync(join(dir, 'ws', 'README'), 'long\n');
    writeFileSync(
      join(dir, 'env.yaml'),
      `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nnetwork: { mode: none }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`,
    );
    const short = await runPlan(dir, SHORT, hostId);
    console.log(`# ${SHORT} steps: peak rss ${short.peakRssMb.toFixed(0)} MB, exit after last step ${(short.exitAt - short.stepEnds.at(-1)!).toFixed(0)} ms`);
    const long = await runPlan(dir, LONG, hostId);
    const first = median(gaps(long.stepEnds, 0, Math.min(100, LONG)));
    const last = median(gaps(long.stepEnds, Math.max(0, LONG - 100), LONG));
    console.log(`# ${LONG} steps: peak rss ${long.peakRssMb.toFixed(0)} MB, step ms first/last 100 ${first.toFixed(1)} / ${last.toFixed(1)}, exit after last step ${(long.exitAt - long.stepEnds.at(-1)!).toFixed(0)} ms, load ${loadavg()[0]!.toFixed(1)}`);
    report('rss_3000_vs_100_steps', long.peakRssMb / short.peakRssMb, 'ratio');
    report('rss_3000_mb', long.peakRssMb, 'absolute');
    report('rss_100_mb', short.peakRssMb, 'absolute');
    report('step_ms_last_vs_first_100', last / first, 'ratio');
    report('step_ms_first_100', first, 'absolute');
    report('step_ms_last_100', last, 'absolute');

    const out = join(dir, 'export.json');
    const exp = await measure(['export', long.runId, '--store', long.store, '--out', out], {});
    if (exp.code !== 0) throw new Error(`berth export exited ${exp.code}: ${exp.stderrTail}`);
    console.log(`# export: ${(statSync(out).size / 1024).toFixed(0)} KB`);
    report('export_rss_mb', exp.peakRssMb, 'absolute');
    report('run_page_kb', await runPageKb(long.store, long.runId), 'absolute');

    const ex = await runPlan(dir, EXIT, hostId);
    report('exit_after_last_step_ms', ex.exitAt - ex.stepEnds.at(-1)!, 'absolute');
    console.log(`# load after: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  } finally {
    await removeHostArtifacts(docker, hostId);
    if (process.env.BENCH_LONG_KEEP) console.log(`# kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}
