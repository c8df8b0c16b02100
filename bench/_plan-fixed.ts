/**
 * plan.fixed_overhead_ms: a one-step plan running `true` (berth/tiny, network none, default
 * snapshot policy) from process start to exit, minus a plain `docker run --rm --network none
 * IMAGE true`; interleaved, medians of BENCH_FIXED_ROUNDS (default 5). The CLI side is a real
 * `berth run` child; the library side (`fixed_overhead_library_ms`) is `Berth.open` + `runPlan` +
 * `close` in this process (no process start). Each side reuses one store over its rounds (a
 * user's `.berth/berth.db`; a warm-up run creates it). The debug `timing` logs give the per-phase profile,
 * printed as `# fixed ...` lines: each phase's median ms, in the order the phases end.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import pino from 'pino';
import { Berth } from '../host';
import type { Report } from './run';
import { median } from './_stats';

interface Timing {
  phase: string;
  ms: number;
  time: number;
  checkpoint?: string;
}

function timingsOf(text: string): Timing[] {
  const out: Timing[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const j = JSON.parse(line) as { msg?: string } & Timing;
      if (j.msg === 'timing') out.push(j);
    } catch {
      // progress text
    }
  }
  return out;
}

function write(dir: string, digest: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'env.yaml'),
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }
image: { ref: "berth/tiny:latest", digest: "${digest}" }
workspace: { path: /workspace, owner: "1000:1000" }
network: { mode: none }
resources: { cpus: 1, memoryMb: 256, pids: 64, diskMb: 512, commandTimeoutS: 60 }
snapshot: { policy: after-each-step, keepLast: 3 }
`,
  );
  writeFileSync(join(dir, 'plan.yaml'), 'name: fixed\nenvironment: env.yaml\nsteps:\n  - { name: t, run: "true", replay: safe }\n');
  return join(dir, 'plan.yaml');
}

async function cli(root: string, plan: string, store: string, hostId: string): Promise<{ ms: number; timings: Timing[] }> {
  const t0 = Date.now();
  const p0 = performance.now();
  const child = spawn(process.execPath, [join(root, 'host/cli/bin.mjs'), 'run', plan, '--store', store], {
    env: { ...process.env, BERTH_LOG_LEVEL: 'debug', BERTH_HOST_ID: hostId },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number>((res) => child.on('close', (c) => res(c ?? -1)));
  const ms = performance.now() - p0;
  if (code !== 0) throw new Error(`berth run exited ${code}: ${err.slice(-2000)}`);
  // Log times relative to the spawn; the process's own start is logged as a duration.
  return { ms, timings: timingsOf(err).map((t) => ({ ...t, time: t.time - t0 })) };
}

async function library(plan: string, store: string, hostId: string): Promise<{ ms: number; timings: Timing[] }> {
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => void (l.includes('"msg":"timing"') && lines.push(l)) });
  const t0 = Date.now();
  const p0 = performance.now();
  const berth = await Berth.open({ store, logger, hostId });
  const r = await berth.runPlan(plan);
  await berth.close();
  const ms = performance.now() - p0;
  if (!r.settled || r.run.state !== 'completed') throw new Error(`library run ended ${r.run.state}`);
  return { ms, timings: timingsOf(lines.join('\n')).map((t) => ({ ...t, time: t.time - t0 })) };
}

async function raw(docker: Dockerode): Promise<number> {
  void docker;
  const p0 = performance.now();
  const child = spawn('docker', ['run', '--rm', '--network', 'none', 'berth/tiny:latest', 'true'], { stdio: 'ignore' });
  const code = await new Promise<number>((res) => child.on('close', (c) => res(c ?? -1)));
  if (code !== 0) throw new Error(`docker run exited ${code}`);
  return performance.now() - p0;
}

/** Median ms per phase (a phase logged several times in a run is summed), in the order phases end. */
function profile(label: string, runs: Array<{ ms: number; timings: Timing[] }>): void {
  const order = new Map<string, number>();
  const per = new Map<string, number[]>();
  for (const r of runs) {
    const sums = new Map<string, number>();
    for (const t of r.timings) {
      const k = t.checkpoint ? `${t.phase} (${t.checkpoint})` : t.phase;
      sums.set(k, (sums.get(k) ?? 0) + t.ms);
      order.set(k, Math.max(order.get(k) ?? 0, t.time));
    }
    for (const [k, v] of sums) per.set(k, [...(per.get(k) ?? []), v]);
  }
  console.log(`# fixed ${label} total: ${median(runs.map((r) => r.ms)).toFixed(0)} ms`);
  for (const [k] of [...order].sort((a, b) => a[1] - b[1])) console.log(`# fixed ${label} ${k}: ${median(per.get(k)!).toFixed(1)} ms`);
}

export async function fixedOverhead(root: string, dir: string, docker: Dockerode, hostId: string, report: Report): Promise<void> {
  const digest = (await docker.getImage('berth/tiny:latest').inspect()).Id;
  const plan = write(join(dir, 'fixed'), digest);
  const rounds = Number(process.env.BENCH_FIXED_ROUNDS ?? 5);
  const cliRuns: Array<{ ms: number; timings: Timing[] }> = [];
  const libRuns: Array<{ ms: number; timings: Timing[] }> = [];
  const rawRuns: number[] = [];
  // One of each first, unmeasured: the engine's and the page cache's first touch.
  await raw(docker);
  // Each side keeps one store, as a user's `.berth/berth.db` (the warm-up run created the CLI's).
  await cli(root, plan, join(dir, 'fixed', 'cli.db'), hostId);
  await library(plan, join(dir, 'fixed', 'lib.db'), hostId);
  for (let i = 0; i < rounds; i++) {
    const sides = [
      async () => rawRuns.push(await raw(docker)),
      async () => cliRuns.push(await cli(root, plan, join(dir, 'fixed', 'cli.db'), hostId)),
      async () => libRuns.push(await library(plan, join(dir, 'fixed', 'lib.db'), hostId)),
    ];
    for (let k = 0; k < sides.length; k++) await sides[(k + i) % sides.length]!();
  }
  profile('cli', cliRuns);
  profile('library', libRuns);
  console.log(`# fixed raw docker run: ${median(rawRuns).toFixed(0)} ms`);
  report('fixed_overhead_ms', median(cliRuns.map((r) => r.ms)) - median(rawRuns), 'absolute');
  report('fixed_overhead_library_ms', median(libRuns.map((r) => r.ms)) - median(rawRuns), 'absolute');
}
