/**
 * plan: a real open-source build end to end, offline, through `berth run` against the same
 * commands as raw `docker exec`s, plus the snapshot cost of a step as a function of its change.
 *
 * - real_build_vs_raw: the SQLite amalgamation that better-sqlite3 ships under
 *   `node_modules/better-sqlite3/deps/sqlite3` (sqlite3.c, 9 MB of C), with the small project in
 *   `bench/plan-project` (configure script, Makefile, a tiny shell, a test against expected
 *   output): configure, `make -j2 all` (library + shell), `make test` (writes nothing into the
 *   workspace), and a `never` step `make dist`. (a) `berth run` through the CLI as a user runs it
 *   (child process, default snapshot policy `after-each-step`), wall clock from spawn to exit;
 *   (b) the same image and create options, raw dockerode: create + start, putArchive of the
 *   workspace, one exec per step. Rounds alternate which side goes first; ratio of medians.
 *   The Berth side's debug `timing` logs give the per-phase breakdown, printed as `# ...` lines.
 * - noop_step_snapshot_ms: a snapshot after a step that changed nothing, in a workspace of 300
 *   files (each 16 KiB) that the upload snapshot already holds; median of 5.
 * - snapshot_5_vs_300_files: a snapshot after a step that rewrote 5 of those files vs after one that
 *   rewrote all 300; interleaved, ratio of medians of 5.
 * - long_line_vs_lines: one step printing 48 MiB on one line vs in 100-character lines, through
 *   `berth run` with live progress (bench/_plan-output.ts); with the peak RSS of each.
 *   plan.streaming_output_vs_buffered: a step printing 50 MB in lines, its output written to the store
 *   while it runs vs only the receipt's tails (bench/_plan-streaming.ts; BENCH_PLAN_ONLY=streaming).
 *
 * - fixed_overhead_ms, fixed_overhead_library_ms: bench/_plan-fixed.ts.
 * - short_build_vs_raw: zlib's configure, build and test (bench/_plan-short.ts).
 *
 * `BENCH_PLAN_BASE=DIR` (`real`): another checkout's built CLI in the same rounds (an A/B of a change):
 *   real_build_vs_base, and each side's time outside its commands.
 * `BENCH_PLAN_IMAGE` (default berth/dev:latest), `BENCH_PLAN_ROUNDS` (default 2), `BENCH_PLAN_ONLY` (`real`, `micro`,
 * `output`, `fixed` or `short`: only those figures).
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { removeStoreSnapshotTags } from '../test/support/snapshot-tags';
import pino from 'pino';
import { parseEnvironment, type Environment } from '../environment';
import { RunSandbox } from '../host/run-sandbox';
import { containerCreateOptions, SandboxHost, snapshotEngine, type Lease } from '../host/sandbox';
import { sandboxSpecOf } from '../host/runtime/sandbox-spec';
// tar-fs is only dockerode's own dependency (not hoisted in every install): pack with the sandbox's own packer.
import { packHostDir, scanHostDir } from '../host/sandbox/archive-pack';
import { Snapshotter } from '../host/snapshot';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import type { Report } from './run';
import { median, timed } from './_stats';
import { outputShapes } from './_plan-output';
import { streamingOutput } from './_plan-streaming';
import { fixedOverhead } from './_plan-fixed';
import { shortBuild } from './_plan-short';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const hostId = `bench-plan-${process.pid}`;
const STEPS = [
  { name: 'configure', run: './configure', replay: 'safe' },
  { name: 'build', run: 'make -j2 all', replay: 'safe' },
  { name: 'test', run: 'make test', replay: 'safe' },
  { name: 'publish', run: 'make dist', replay: 'never' },
] as const;

function envYaml(imageRef: string, digest: string): string {
  return `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }
image: { ref: "${imageRef}", digest: "${digest}" }
workspace: { path: /workspace, owner: "1000:1000" }
network: { mode: none }
resources: { cpus: 2, memoryMb: 2048, pids: 512, diskMb: 4096, commandTimeoutS: 900 }
snapshot: { policy: after-each-step, keepLast: 10 }
`;
}

/** The project directory: the amalgamation from node_modules plus bench/plan-project. */
function makeProject(dir: string): string {
  const project = join(dir, 'project');
  mkdirSync(project);
  const amalgamation = join(root, 'node_modules/better-sqlite3/deps/sqlite3');
  for (const f of readdirSync(amalgamation)) copyFileSync(join(amalgamation, f), join(project, f));
  const own = join(here, 'plan-project');
  for (const f of readdirSync(own)) copyFileSync(join(own, f), join(project, f));
  return project;
}

/** One timing log line of the Berth side. */
interface Timing {
  phase: string;
  ms: number;
  time: number;
  checkpoint?: string;
}

async function berthRun(dir: string, round: number, cliRoot = root): Promise<{ ms: number; timings: Timing[]; steps: Array<{ step: string; durationMs: number; exitCode: number }> }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [join(cliRoot, 'host/cli/bin.mjs'), 'run', join(dir, 'plan.yaml'), '--store', join(dir, `run-${round}${cliRoot === root ? '' : '-base'}.db`), '--json'], {
    cwd: dir,
    env: { ...process.env, BERTH_LOG_LEVEL: 'debug', BERTH_HOST_ID: hostId },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number>((res) => child.on('close', (c) => res(c ?? -1)));
  const ms = performance.now() - t0;
  if (code !== 0) throw new Error(`berth run exited ${code}: ${err.slice(-2000)}`);
  const timings: Timing[] = [];
  for (const line of err.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const j = JSON.parse(line) as { msg?: string } & Timing;
      if (j.msg === 'timing') timings.push(j);
    } catch {
      // progress text, not a log line
    }
  }
  // --json prints progress objects one per line, then the summary as the last line; a baseline
  // checkout from before that pretty-printed the summary (it starts at a line that is just "{").
  const pretty = out.lastIndexOf('\n{\n');
  const summary = JSON.parse(pretty >= 0 ? out.slice(pretty + 1) : out.trim().split('\n').at(-1)!) as { steps: Array<{ step: string; durationMs: number; exitCode: number }> };
  return { ms, timings, steps: summary.steps };
}

async function rawRun(docker: Dockerode, env: Environment, project: string): Promise<{ ms: number; execMs: number; stepMs: number[] }> {
  const t0 = performance.now();
  const c = await docker.createContainer(containerCreateOptions(sandboxSpecOf(env), { 'berth.host': hostId, 'berth.bench': 'plan-raw' }));
  try {
    await c.start();
    const tar = packHostDir(project, (await scanHostDir(project)).entries, [], { uid: 1000, gid: 1000 }) as unknown as NodeJS.ReadableStream;
    await c.putArchive(tar, { path: env.workspace.path });
    let execMs = 0;
    const stepMs: number[] = [];
    for (const step of STEPS) {
      const e0 = performance.now();
      const exec = await c.exec({ Cmd: ['sh', '-c', step.run], User: env.workspace.owner, WorkingDir: env.workspace.path, AttachStdout: true, AttachStderr: true });
      const stream = await exec.start({});
      await new Promise<void>((res, rej) => {
        stream.on('end', res);
        stream.on('error', rej);
        stream.resume();
      });
      const info = await exec.inspect();
      if (info.ExitCode !== 0) throw new Error(`raw step ${step.name} exited ${info.ExitCode}`);
      stepMs.push(performance.now() - e0);
      execMs += performance.now() - e0;
    }
    return { ms: performance.now() - t0, execMs, stepMs };
  } finally {
    await c.remove({ force: true });
  }
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** Where the Berth side's time went, per phase, as `#` lines (medians over rounds). */
function breakdown(runs: Array<Awaited<ReturnType<typeof berthRun>>>, raw: number[], rawSteps: number[][] = []): void {
  const phases = new Map<string, number[]>();
  const add = (k: string, v: number) => phases.set(k, [...(phases.get(k) ?? []), v]);
  for (const r of runs) {
    const by = (p: string) => r.timings.filter((t) => t.phase === p);
    const lease = by('lease')[0];
    const upload = by('snapshot').find((t) => t.checkpoint === 'upload');
    add('total', r.ms);
    add('lease', lease?.ms ?? 0);
    // The upload as a layer built here (pack, load into the engine) comes before the lease from its image;
    // into a fresh container, it is the gap between the lease's end and the upload snapshot's start.
    const layer = [...by('upload.layer_pack'), ...by('upload.layer_load')];
    const uploadMs = layer.length ? sum(layer.map((t) => t.ms)) : lease && upload ? upload.time - upload.ms - lease.time : 0;
    add('upload', uploadMs);
    add('exec (steps)', sum(r.steps.map((s) => s.durationMs)));
    add('snapshot (all, wall)', sum(by('snapshot').map((t) => t.ms)));
    add('snapshot upload (wall)', upload?.ms ?? 0);
    for (const s of by('snapshot').filter((t) => t.checkpoint !== 'upload')) add(`snapshot ${s.checkpoint} (wall)`, s.ms);
    for (const p of ['snapshot.layer_check', 'snapshot.layer_scan', 'snapshot.delta_build', 'snapshot.layer_verify', 'snapshot.delta_write', 'snapshot.scan', 'snapshot.outside', 'snapshot.tag', 'snapshot.commit', 'snapshot.archive_scan', 'snapshot.manifest_write', 'snapshot.rebase']) add(`  ${p} (sum)`, sum(by(p).map((t) => t.ms)));
    // Per step: the step's wall inside Berth (execStep), the command's own exec wall, the host's CPU meanwhile, and the exec's set-up and after-work.
    const execs = by('step.exec') as Array<Timing & { index: number; commandMs: number; hostCpuMs: number }>;
    const parts = by('exec.parts') as Array<Timing & { setupMs: number; runMs: number; afterMs: number }>;
    execs.forEach((e, i) => {
      add(`step ${e.index} wall (execStep)`, e.ms);
      add(`step ${e.index}   command (exec)`, e.commandMs);
      add(`step ${e.index}   host cpu`, e.hostCpuMs);
      const p = parts[i];
      if (p) {
        add(`step ${e.index}   exec setup`, p.setupMs);
        add(`step ${e.index}   exec run`, p.runMs);
        add(`step ${e.index}   exec after`, p.afterMs);
      }
    });
    add('rest: CLI start, kernel, store commits', r.ms - (lease?.ms ?? 0) - uploadMs - sum(r.steps.map((s) => s.durationMs)) - sum(by('snapshot').map((t) => t.ms)));
  }
  add('raw total', 0);
  phases.set('raw total', raw);
  rawSteps[0]?.forEach((_, i) => phases.set(`raw step ${i} exec`, rawSteps.map((r) => r[i]!)));
  for (const [k, v] of phases) console.log(`# plan ${k}: ${median(v).toFixed(0)} ms`);
}

async function write(lease: Lease, script: string) {
  const r = await lease.exec(['sh', '-c', script], { timeoutMs: 120_000 });
  if (r.exitCode !== 0) throw new Error(`exec failed: ${r.stderr}`);
}

/** noop and 5-vs-300 snapshot figures, in process, on the same image. */
async function snapshotCosts(docker: Dockerode, env: Environment, dir: string, report: Report): Promise<void> {
  const lines: Timing[] = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => void (l.includes('"msg":"timing"') && lines.push(JSON.parse(l) as Timing)) });
  const store = openSqliteStore(join(dir, 'micro.db'));
  const sandbox = new SandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
  const engine = snapshotEngine(docker);
  const plan = new RunSandbox({ store, sandbox, snapshots: new Snapshotter({ engine, store, logger, ...(process.env.BENCH_DELTA_MAX_BYTES ? { deltaMaxBytes: Number(process.env.BENCH_DELTA_MAX_BYTES) } : {}) }), clock: systemClock, logger, ...(process.env.BENCH_REBASE_BYTES ? { rebaseBytes: Number(process.env.BENCH_REBASE_BYTES) } : {}) });
  const runId = 'micro';
  try {
    let lease = await plan.leaseFresh(runId, 'bench', env, AbortSignal.timeout(60_000));
    // 300 files of 16 KiB in 10 directories, as an upload would leave them.
    await write(lease, 'for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p src/$d; for f in $(seq 0 29); do head -c 16384 /dev/urandom > src/$d/f$f.c; done; done');
    let parent: string | null = null;
    const phases = new Map<string, number[]>();
    const snap = async (kind = '') => {
      lines.length = 0;
      const [ms, s] = await timed(() => plan.snapshot(runId, 'bench', env, plan.held(runId) ?? lease, 'bench', parent, AbortSignal.timeout(120_000)));
      parent = s.record.id;
      lease = s.lease;
      if (kind) for (const t of lines) if (t.phase !== 'snapshot') phases.set(`${kind} ${t.phase}`, [...(phases.get(`${kind} ${t.phase}`) ?? []), t.ms]);
      return ms;
    };
    await snap();
    const noop: number[] = [];
    const five: number[] = [];
    const all: number[] = [];
    for (let i = 0; i < 5; i++) {
      noop.push(await snap('noop'));
      await write(lease, `for d in 0 1 2 3 4; do head -c 16384 /dev/urandom > src/$d/f${i}.c; done`);
      five.push(await snap('5 files'));
      await write(lease, 'for f in src/*/*.c; do head -c 16384 /dev/urandom > $f; done');
      all.push(await snap('300 files'));
    }
    // Per snapshot: the sum of a phase's calls in it, median over rounds.
    for (const [k, v] of phases) console.log(`# plan snapshot ${k}: ${median(v).toFixed(0)} ms (median of ${v.length} calls)`);
    report('noop_step_snapshot_ms', median(noop), 'absolute');
    report('snapshot_5_files_ms', median(five), 'absolute');
    report('snapshot_300_files_ms', median(all), 'absolute');
    report('snapshot_5_vs_300_files', median(five) / median(all), 'ratio');
  } finally {
    await plan.finish(runId).catch(() => {});
    await sandbox.close();
    await store.close();
  }
}

export default async function planBench(report: Report): Promise<void> {
  const docker = new Dockerode();
  const imageRef = process.env.BENCH_PLAN_IMAGE ?? 'berth/dev:latest';
  const rounds = Number(process.env.BENCH_PLAN_ROUNDS ?? 2);
  const digest = (await docker.getImage(imageRef).inspect()).Id;
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-plan-'));
  try {
    const project = makeProject(dir);
    writeFileSync(join(dir, 'env.yaml'), envYaml(imageRef, digest));
    writeFileSync(join(dir, 'plan.yaml'), `name: sqlite\nenvironment: env.yaml\nworkspace: project\nsteps:\n${STEPS.map((s) => `  - { name: ${s.name}, run: "${s.run}", replay: ${s.replay} }\n`).join('')}`);
    const env = parseEnvironment(envYaml(imageRef, digest), join(dir, 'env.yaml'));
    if (process.env.BENCH_PLAN_ONLY === 'micro') return await snapshotCosts(docker, env, dir, report);
    if (process.env.BENCH_PLAN_ONLY === 'output') return await outputShapes(root, dir, hostId, report);
    if (process.env.BENCH_PLAN_ONLY === 'streaming') return await streamingOutput(root, dir, hostId, report);
    if (process.env.BENCH_PLAN_ONLY === 'fixed') return await fixedOverhead(root, dir, docker, hostId, report);
    if (process.env.BENCH_PLAN_ONLY === 'short') return await shortBuild(root, dir, docker, hostId, report);
    const berth: Array<Awaited<ReturnType<typeof berthRun>>> = [];
    const raw: number[] = [];
    const rawSteps: number[][] = [];
    const rawOnce = async () => {
      const r = await rawRun(docker, env, project);
      raw.push(r.ms);
      rawSteps.push(r.stepMs);
    };
    // BENCH_PLAN_BASE=DIR: another checkout's CLI (built) in the same rounds, for an A/B of a change.
    const baseRoot = process.env.BENCH_PLAN_BASE;
    const base: Array<Awaited<ReturnType<typeof berthRun>>> = [];
    const sides = [rawOnce, async (i: number) => void berth.push(await berthRun(dir, i)), ...(baseRoot ? [async (i: number) => void base.push(await berthRun(dir, i, baseRoot))] : [])];
    for (let i = 0; i < rounds; i++) {
      // Rotated: each side goes first in turn.
      for (let k = 0; k < sides.length; k++) await sides[(k + i) % sides.length]!(i);
      if (baseRoot) console.log(`# round ${i + 1}: berth ${berth.at(-1)!.ms.toFixed(0)} base ${base.at(-1)!.ms.toFixed(0)} raw ${raw.at(-1)!.toFixed(0)} ms, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
    }
    breakdown(berth, raw, rawSteps);
    report('real_build_vs_raw', median(berth.map((b) => b.ms)) / median(raw), 'ratio');
    report('real_build_ms', median(berth.map((b) => b.ms)), 'absolute');
    report('raw_build_ms', median(raw), 'absolute');
    if (baseRoot) {
      report('real_build_base_vs_raw', median(base.map((b) => b.ms)) / median(raw), 'ratio');
      report('real_build_vs_base', median(berth.map((b) => b.ms)) / median(base.map((b) => b.ms)), 'ratio');
      // Outside the commands (the part a change can move): the run's wall less its steps' command walls.
      const outside = (rs: typeof berth) => median(rs.map((r) => r.ms - sum(r.timings.filter((t) => t.phase === 'step.exec').map((t) => t.ms))));
      report('real_build_outside_commands_ms', outside(berth), 'absolute');
      report('real_build_base_outside_commands_ms', outside(base), 'absolute');
    }
    if (process.env.BENCH_PLAN_ONLY === 'real') return;
    await snapshotCosts(docker, env, dir, report);
    await outputShapes(root, dir, hostId, report);
    await streamingOutput(root, dir, hostId, report);
    await fixedOverhead(root, dir, docker, hostId, report);
    await shortBuild(root, dir, docker, hostId, report);
  } finally {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
    // Snapshot tags on an environment image (a fresh sandbox's first snapshot) carry no host label.
    for (const f of readdirSync(dir, { recursive: true, withFileTypes: true })) if (f.isFile() && f.name.endsWith('.db')) await removeStoreSnapshotTags(docker, join(f.parentPath, f.name));
    // Snapshot images of this bench (the CLI keeps the newest ones of each run).
    // Children before parents: a few passes, each removing what nothing builds on any more.
    for (let pass = 0; pass < 5; pass++) {
      const images = await docker.listImages({ filters: { label: [`berth.host=${hostId}`] } });
      if (images.length === 0) break;
      for (const img of images) await docker.getImage(img.Id).remove({ force: true }).catch(() => {});
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
