/**
 * `npx tsx bench/_start-ab.ts OLD_ROOT NEW_ROOT [rounds]`: plan.fixed_overhead_ms's CLI side (a
 * one-step plan running `true`, as bench/_plan-fixed.ts writes it) for two checkouts, alternating
 * which goes first each round, each on its own store: wall ms from spawn to exit, the child's CPU
 * (user + system, clock ticks), and its debug `timing` phases (process.start, store.open,
 * preflight, ...), medians; the load beside. To compare a build with the one before it.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { median } from './_stats';

const [oldRoot, newRoot, r] = process.argv.slice(2);
const rounds = Number(r ?? 7);
const hostId = `bench-start-ab-${process.pid}`;
const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
const digest = (await docker.getImage('berth/tiny:latest').inspect()).Id;
const dir = mkdtempSync(join(tmpdir(), 'berth-start-ab-'));
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${digest}" }\nworkspace: { path: /workspace, owner: "1000:1000" }\nnetwork: { mode: none }\nresources: { cpus: 1, memoryMb: 256, pids: 64, diskMb: 512, commandTimeoutS: 60 }\nsnapshot: { policy: after-each-step, keepLast: 3 }\n`);
writeFileSync(join(dir, 'plan.yaml'), 'name: fixed\nenvironment: env.yaml\nsteps:\n  - { name: t, run: "true", replay: safe }\n');

async function run(root: string, store: string): Promise<Map<string, number>> {
  const p0 = performance.now();
  const child = spawn(process.execPath, [join(root, 'host/cli/bin.mjs'), 'run', join(dir, 'plan.yaml'), '--store', store], { env: { ...process.env, BERTH_LOG_LEVEL: 'debug', BERTH_HOST_ID: hostId }, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  let cpu = 0;
  const timer = setInterval(() => {
    try {
      const f = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      cpu = (Number(f[11]) + Number(f[12])) * 10;
    } catch {
      // exited
    }
  }, 5);
  const code = await new Promise<number>((res) => child.on('close', (c) => res(c ?? -1)));
  clearInterval(timer);
  if (code !== 0) throw new Error(`${root}: berth run exited ${code}: ${err.slice(-1500)}`);
  const m = new Map<string, number>([['wall', performance.now() - p0], ['cpu (last sample, ticks)', cpu]]);
  for (const line of err.split('\n')) {
    if (!line.startsWith('{')) continue;
    const j = JSON.parse(line) as { msg?: string; phase?: string; ms?: number };
    if (j.msg === 'timing' && j.phase && j.ms !== undefined) m.set(j.phase, (m.get(j.phase) ?? 0) + j.ms);
  }
  return m;
}
try {
  const sides = [{ root: oldRoot!, all: [] as Array<Map<string, number>> }, { root: newRoot!, all: [] as Array<Map<string, number>> }];
  for (const s of sides) await run(s.root, join(dir, `${sides.indexOf(s)}.db`)); // warm-up: creates each store
  const loads: number[] = [];
  for (let i = 0; i < rounds; i++) {
    for (const s of i % 2 ? [...sides].reverse() : sides) s.all.push(await run(s.root, join(dir, `${sides.indexOf(s)}.db`)));
    loads.push(loadavg()[0]!);
  }
  const keys = ['wall', 'cpu (last sample, ticks)', 'process.start', 'store.open', 'preflight'];
  for (const k of keys) console.log(k.padEnd(26), sides.map((s) => `${String(Math.round(median(s.all.map((m) => m.get(k) ?? NaN)))).padStart(6)}`).join('  '), '  (old  new)');
  console.log(`# ${rounds} rounds, load ${loads.map((l) => l.toFixed(1)).join(' ')}`);
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
