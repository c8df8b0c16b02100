/**
 * A per-step A/B of a plan's commands (a profiling tool, not a figure): each round runs the plan
 * through `berth run` in each of the `BENCH_AB_VARIANTS` (env assignments, `;`-separated, `-` for none)
 * and the same commands as raw `docker exec`s in a container made with the sandbox's own create
 * options, and prints, per step, the median command wall of each side and the Berth host's CPU.
 * Usage: tsx bench/_plan-step-ab.ts DIR (holding plan.yaml, env.yaml and the workspace it names).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Dockerode from 'dockerode';
import { parse } from 'yaml';
import { parseEnvironment } from '../environment';
import { containerCreateOptions } from '../host/sandbox';
import { packHostDir, scanHostDir } from '../host/sandbox/archive-pack';
import { sandboxSpecOf } from '../host/runtime/sandbox-spec';
import { cgroupCounters } from '../host/sandbox/cgroup-counters';
import { median } from './_stats';

const root = resolve(import.meta.dirname, '..');
const dir = resolve(process.argv[2]!);
const plan = parse(readFileSync(join(dir, 'plan.yaml'), 'utf8')) as { workspace: string; steps: Array<{ run: string }> };
const env = parseEnvironment(readFileSync(join(dir, 'env.yaml'), 'utf8'), join(dir, 'env.yaml'));
const hostId = `bench-ab-${process.pid}`;
const docker = new Dockerode();
const rows = new Map<string, number[]>();
const add = (k: string, v: number) => rows.set(k, [...(rows.get(k) ?? []), v]);

async function berth(name: string, vars: Record<string, string>, i: number) {
  const t0 = performance.now();
  const child = spawn(process.execPath, [join(root, 'host/cli/bin.mjs'), 'run', join(dir, 'plan.yaml'), '--store', join(dir, `ab-${name}-${i}-${Date.now()}.db`)], { cwd: dir, env: { ...process.env, ...vars, BERTH_LOG_LEVEL: 'debug', BERTH_HOST_ID: hostId }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (c: Buffer) => (log += c.toString()));
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? -1)));
  if (code !== 0) throw new Error(`berth run exited ${code}: ${log.slice(-2000)}`);
  add(`${name} total`, performance.now() - t0);
  for (const l of log.split('\n')) {
    if (!l.includes('"step.exec"')) continue;
    const j = JSON.parse(l) as { index: number; commandMs: number; hostCpuMs: number; sandboxCpuMs?: number };
    add(`${name} step ${j.index} command`, j.commandMs);
    if (j.sandboxCpuMs !== undefined) add(`${name} step ${j.index} sandbox cpu`, j.sandboxCpuMs);
    add(`${name} step ${j.index} host cpu`, j.hostCpuMs);
  }
}

async function raw(i: number) {
  const c = await docker.createContainer(containerCreateOptions(sandboxSpecOf(env), { 'berth.host': hostId, 'berth.bench': 'plan-ab-raw' }));
  try {
    await c.start();
    const ws = join(dir, plan.workspace);
    await c.putArchive(packHostDir(ws, (await scanHostDir(ws)).entries, [], { uid: 1000, gid: 1000 }) as unknown as NodeJS.ReadableStream, { path: env.workspace.path });
    for (const [k, step] of plan.steps.entries()) {
      const cpu0 = (await cgroupCounters(c))?.cpuNs;
      const t0 = performance.now();
      const exec = await c.exec({ Cmd: ['sh', '-c', step.run], User: env.workspace.owner, WorkingDir: env.workspace.path, AttachStdout: true, AttachStderr: true });
      const stream = await exec.start({});
      await new Promise<void>((res, rej) => stream.on('end', res).on('error', rej).resume());
      if ((await exec.inspect()).ExitCode !== 0) throw new Error(`raw step ${k} failed`);
      add(`raw step ${k} command`, performance.now() - t0);
      const cpu1 = (await cgroupCounters(c))?.cpuNs;
      if (cpu0 !== undefined && cpu1 !== undefined) add(`raw step ${k} sandbox cpu`, (cpu1 - cpu0) / 1e6);
    }
  } finally {
    await c.remove({ force: true });
  }
  void i;
}

const variants = (process.env.BENCH_AB_VARIANTS ?? '-').split(';').map((v, n) => ({
  name: v === '-' ? 'berth' : `berth[${v}]`,
  vars: Object.fromEntries(v === '-' ? [] : v.split(',').map((a) => a.split('=') as [string, string])),
  n,
}));
const rounds = Number(process.env.BENCH_AB_ROUNDS ?? 3);
try {
  for (let i = 0; i < rounds; i++) {
    const order = [...variants.map((v) => () => berth(v.name, v.vars, i)), () => raw(i)];
    // Rotate which side goes first each round.
    for (let k = 0; k < order.length; k++) await order[(k + i) % order.length]!();
    console.log(`# round ${i + 1} done, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  }
  for (const [k, v] of [...rows].sort(([a], [b]) => a.localeCompare(b))) console.log(`${k}: ${median(v).toFixed(0)} ms  (${v.map((x) => x.toFixed(0)).join(' ')})`);
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  for (let pass = 0; pass < 5; pass++) {
    const images = await docker.listImages({ filters: { label: [`berth.host=${hostId}`] } });
    if (!images.length) break;
    for (const img of images) await docker.getImage(img.Id).remove({ force: true }).catch(() => {});
  }
}
