/**
 * Where a `berth run` of the real build (bench/plan.ts's SQLite plan) spends the time outside its
 * commands, as a timeline (a profiling tool, not a figure): each round runs the plan through the
 * CLI of every checkout in `BENCH_TIMELINE_CLIS` (`name=DIR;name=DIR`, default this one), rotated,
 * and prints per checkout the median of each milestone (ms since the spawn) and of each gap between
 * them, from the debug `timing` logs. Usage: tsx bench/_plan-timeline.ts [ROUNDS] (BENCH_TIMELINE_QUICK=1: no compile)
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Dockerode from 'dockerode';
import { median } from './_stats';

const root = resolve(import.meta.dirname, '..');
const hostId = `bench-timeline-${process.pid}`;
const rounds = Number(process.argv[2] ?? 3);
const clis = (process.env.BENCH_TIMELINE_CLIS ?? `this=${root}`).split(';').map((s) => s.split('=') as [string, string]);
const docker = new Dockerode();
const imageRef = process.env.BENCH_PLAN_IMAGE ?? 'berth/dev:latest';
const digest = (await docker.getImage(imageRef).inspect()).Id;
const dir = mkdtempSync(join(tmpdir(), 'berth-bench-timeline-'));
const project = join(dir, 'project');
mkdirSync(project);
for (const from of [join(root, 'node_modules/better-sqlite3/deps/sqlite3'), join(root, 'bench/plan-project')]) for (const f of readdirSync(from)) copyFileSync(join(from, f), join(project, f));
writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }
image: { ref: "${imageRef}", digest: "${digest}" }
workspace: { path: /workspace, owner: "1000:1000" }
network: { mode: none }
resources: { cpus: 2, memoryMb: 2048, pids: 512, diskMb: 4096, commandTimeoutS: 900 }
snapshot: { policy: after-each-step, keepLast: 10 }
`);
// BENCH_TIMELINE_QUICK=1: the same workspace and step shapes with no compile (the phases outside the
// commands only: on a loaded machine the 9 s build takes minutes and its spread hides them).
const steps = process.env.BENCH_TIMELINE_QUICK
  ? [['configure', './configure', 'safe'], ['build', 'mkdir -p build && head -c 3000000 /dev/urandom > build/libsqlite3.a', 'safe'], ['test', 'true', 'safe'], ['publish', 'mkdir -p dist && head -c 6000000 /dev/urandom > dist/sqlite-build.tar', 'never']]
  : [['configure', './configure', 'safe'], ['build', 'make -j2 all', 'safe'], ['test', 'make test', 'safe'], ['publish', 'make dist', 'never']];
writeFileSync(join(dir, 'plan.yaml'), `name: sqlite\nenvironment: env.yaml\nworkspace: project\nsteps:\n${steps.map(([n, r, p]) => `  - { name: ${n}, run: "${r}", replay: ${p} }\n`).join('')}`);

type Line = { msg: string; time: number; phase?: string; ms?: number; checkpoint?: string; index?: number; commandMs?: number };
const rows = new Map<string, Map<string, number[]>>();
const add = (side: string, k: string, v: number) => {
  const m = rows.get(side) ?? new Map<string, number[]>();
  rows.set(side, m);
  m.set(k, [...(m.get(k) ?? []), v]);
};

async function once(side: string, cliRoot: string, i: number): Promise<void> {
  const t0 = Date.now();
  const child = spawn(process.execPath, [join(cliRoot, 'host/cli/bin.mjs'), 'run', join(dir, 'plan.yaml'), '--store', join(dir, `${side}-${i}.db`)], { cwd: dir, env: { ...process.env, BERTH_LOG_LEVEL: 'debug', BERTH_HOST_ID: hostId }, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? -1)));
  const end = Date.now() - t0;
  if (code !== 0) throw new Error(`${side}: berth run exited ${code}: ${err.slice(-2000)}`);
  const lines: Line[] = [];
  for (const l of err.split('\n')) {
    if (!l.startsWith('{')) continue;
    try {
      const j = JSON.parse(l) as Line;
      lines.push({ ...j, time: j.time - t0 });
    } catch {
      // progress text
    }
  }
  const at = (phase: string, pred: (l: Line) => boolean = () => true) => lines.find((l) => l.msg === 'timing' && l.phase === phase && pred(l));
  const marks: Array<[string, number | undefined]> = [
    ['store opened', at('store.open')?.time],
    ['preflight end', at('preflight')?.time],
    ['sweep end', at('host.sweep')?.time],
    ['submit end', at('submit')?.time],
    ['pack end', at('upload.layer_pack')?.time],
    ['load start', ((l) => l && l.time - l.ms!)(at('upload.layer_load'))],
    ['load end', at('upload.layer_load')?.time],
    ['lease end', at('lease')?.time],
    ['upload read end', at('snapshot', (l) => l.checkpoint === 'upload')?.time],
  ];
  for (let k = 0; k < steps.length; k++) {
    const e = at('step.exec', (l) => l.index === k);
    marks.push([`step ${k} start`, e && e.time - e.ms!], [`step ${k} end`, e?.time], [`step ${k} snapshot end`, at('snapshot', (l) => l.checkpoint?.startsWith(`step:${k}:`) ?? false)?.time]);
  }
  marks.push(['drive end', at('drive.steps')?.time], ['run_end end', at('run_end')?.time], ['close end', at('cli.close')?.time], ['exit', end]);
  let prev: [string, number] | undefined;
  for (const [name, t] of marks) {
    if (t === undefined) continue;
    add(side, `@ ${name}`, t);
    if (prev) add(side, `  ${prev[0]} -> ${name}`, t - prev[1]);
    prev = [name, t];
  }
  const commands = lines.filter((l) => l.phase === 'step.exec').reduce((a, l) => a + l.ms!, 0);
  add(side, 'total', end);
  add(side, 'commands (step.exec)', commands);
  add(side, 'outside the commands', end - commands);
  const sums = new Map<string, number>();
  // Phases may repeat in a run: the sum per run, then the median over runs.
  for (const l of lines) if (l.msg === 'timing' && l.phase && !['step.exec', 'exec.parts'].includes(l.phase)) sums.set(`phase ${l.phase}${l.checkpoint ? ` ${l.checkpoint}` : ''} (sum)`, (sums.get(`phase ${l.phase}${l.checkpoint ? ` ${l.checkpoint}` : ''} (sum)`) ?? 0) + l.ms!);
  for (const [k, v] of sums) add(side, k, v);
}

try {
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < clis.length; k++) {
      const [side, cliRoot] = clis[(k + i) % clis.length]!;
      await once(side, cliRoot, i);
    }
    console.log(`# round ${i + 1} done, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  }
  for (const [side, m] of rows) {
    console.log(`## ${side}`);
    for (const [k, v] of m) console.log(`${k}: ${median(v).toFixed(0)}  (${v.map((x) => x.toFixed(0)).join(' ')})`);
  }
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  for (let pass = 0; pass < 5; pass++) {
    const images = await docker.listImages({ filters: { label: [`berth.host=${hostId}`] } });
    if (!images.length) break;
    for (const img of images) await docker.getImage(img.Id).remove({ force: true }).catch(() => {});
  }
  rmSync(dir, { recursive: true, force: true });
}
