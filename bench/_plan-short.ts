/**
 * plan.short_build_vs_raw: a real open-source C project whose plain configure, build and test take
 * 5-15 s: Jim Tcl 0.81 (a Tcl interpreter: `./configure` (autosetup, which first builds its own
 * bootstrap interpreter), `make -j2`, `make test` (its test suite of ~100 files)), the source of
 * Debian bookworm's `jimtcl` package. `BENCH_SHORT_PROJECT=zlib`: zlib 1.2.13 instead (`make
 * test`; 2.4 s on a quiet machine, shorter than the issue asks). Sources come from `apt-get
 * source` against the Debian mirror these machines reach, through a sources list of the bench's
 * own, cached in ~/.cache/berth-bench (or BENCH_SHORT_TARBALL). In berth/dev, network none:
 * (a) `berth run` through the CLI (a child process, default snapshot policy), spawn to exit;
 * (b) the same commands in one plain `docker run --rm` from the same image, the workspace a fresh
 *     copy bind-mounted, as a user would run them.
 * BENCH_SHORT_ROUNDS (default 5) rounds, interleaved (which side goes first alternates); ratio of medians.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import type { Report } from './run';
import { median } from './_stats';

const PROJECTS = {
  jimtcl: { source: 'jimtcl=0.81+dfsg0-2', steps: ['./configure', 'make -j2', 'make test'] },
  zlib: { source: 'zlib=1:1.2.13.dfsg-1', steps: ['./configure', 'make -j2', 'make test'] },
} as const;
type Project = keyof typeof PROJECTS;

/** The project's source tarball (`*.orig.tar.*`), fetched once from the Debian mirror. */
function tarball(project: Project): string {
  if (process.env.BENCH_SHORT_TARBALL) return process.env.BENCH_SHORT_TARBALL;
  const cache = join(homedir(), `.cache/berth-bench/${project}`);
  const orig = () => (existsSync(cache) ? readdirSync(cache).find((f) => /\.orig\.tar\.(gz|bz2|xz)$/.test(f)) : undefined);
  const found = orig();
  if (found) return join(cache, found);
  mkdirSync(join(cache, 'lists/partial'), { recursive: true });
  writeFileSync(join(cache, 'src.sources'), 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n');
  const o = ['-q', '-o', 'Dir::Etc::SourceList=/dev/null', '-o', `Dir::Etc::SourceParts=${cache}`, '-o', `Dir::State::Lists=${join(cache, 'lists')}`];
  execFileSync('apt-get', [...o, 'update'], { stdio: 'ignore' });
  execFileSync('apt-get', [...o, 'source', '--download-only', PROJECTS[project].source], { cwd: cache, stdio: 'ignore' });
  return join(cache, orig()!);
}

function unpack(tar: string, dir: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync('tar', ['-xaf', tar, '-C', dir, '--strip-components=1']);
}

function wait(child: ReturnType<typeof spawn>, what: string): Promise<void> {
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
  return new Promise((res, rej) => child.on('close', (c) => (c === 0 ? res() : rej(new Error(`${what} exited ${c}: ${err}`)))));
}

export async function shortBuild(root: string, dir: string, docker: Dockerode, hostId: string, report: Report): Promise<void> {
  const imageRef = process.env.BENCH_PLAN_IMAGE ?? 'berth/dev:latest';
  const digest = (await docker.getImage(imageRef).inspect()).Id;
  const project = (process.env.BENCH_SHORT_PROJECT ?? 'jimtcl') as Project;
  if (!(project in PROJECTS)) throw new Error(`BENCH_SHORT_PROJECT: one of ${Object.keys(PROJECTS).join(', ')}`);
  const STEPS = PROJECTS[project].steps;
  const base = join(dir, 'short');
  unpack(tarball(project), join(base, 'src'));
  writeFileSync(
    join(base, 'env.yaml'),
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }
image: { ref: "${imageRef}", digest: "${digest}" }
workspace: { path: /workspace, owner: "1000:1000" }
network: { mode: none }
resources: { cpus: 2, memoryMb: 2048, pids: 512, diskMb: 4096, commandTimeoutS: 600 }
snapshot: { policy: after-each-step, keepLast: 5 }
`,
  );
  writeFileSync(join(base, 'plan.yaml'), `name: ${project}\nenvironment: env.yaml\nworkspace: src\nsteps:\n${STEPS.map((s, i) => `  - { name: s${i}, run: "${s}", replay: safe }\n`).join('')}`);
  // Per-phase figures of each side, printed as `#` lines (medians): the Berth side's debug `timing` logs, the raw side's step boundaries.
  const phases = new Map<string, number[]>();
  const add = (k: string, v: number) => phases.set(k, [...(phases.get(k) ?? []), v]);
  const berth = async (i: number) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [join(root, 'host/cli/bin.mjs'), 'run', join(base, 'plan.yaml'), '--store', join(base, `run-${i}.db`)], { env: { ...process.env, BERTH_HOST_ID: hostId, BERTH_LOG_LEVEL: 'debug' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (c: Buffer) => (log += c.toString()));
    await wait(child, 'berth run');
    const ms = performance.now() - t0;
    const timings = log.split('\n').flatMap((l) => {
      try {
        const j = JSON.parse(l) as { msg?: string; phase?: string; ms?: number; checkpoint?: string; index?: number; commandMs?: number; hostCpuMs?: number };
        return j.msg === 'timing' ? [j] : [];
      } catch {
        return [];
      }
    });
    let accounted = 0;
    for (const t of timings) {
      if (t.phase === 'step.exec') {
        add(`berth step ${t.index} wall`, t.ms!);
        add(`berth step ${t.index} command`, t.commandMs!);
        add(`berth step ${t.index} host cpu`, t.hostCpuMs!);
        accounted += t.ms!;
      } else if (t.phase === 'snapshot') {
        add(`berth snapshot ${t.checkpoint}`, t.ms!);
        accounted += t.ms!;
      } else if (['process.start', 'store.open', 'preflight', 'host.sweep', 'submit', 'upload.layer_pack', 'upload.layer_load', 'lease', 'drive.stop_runtime', 'run_end', 'cli.close'].includes(t.phase!)) {
        add(`berth ${t.phase}`, t.ms!);
        accounted += t.ms!;
      }
    }
    add('berth rest (kernel, commits, between steps)', ms - accounted);
    return ms;
  };
  // Step boundaries from inside the raw container (its clock is the host's): what each command took there.
  const stamped = STEPS.map((s) => `date +%s%N >&2 && ${s}`).join(' && ') + ' && date +%s%N >&2';
  const raw = async (i: number) => {
    const ws = join(base, `raw-${i}`);
    cpSync(join(base, 'src'), ws, { recursive: true });
    chmodSync(ws, 0o777);
    execFileSync('chown', ['-R', '1000:1000', ws]);
    const t0 = performance.now();
    const child = spawn('docker', ['run', '--rm', '--network', 'none', '--cpus', '2', '--memory', '2g', '-u', '1000:1000', '-v', `${ws}:/workspace`, '-w', '/workspace', imageRef, 'sh', '-c', stamped], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (c: Buffer) => (log += c.toString()));
    await wait(child, 'docker run');
    const ms = performance.now() - t0;
    const marks = log.split('\n').filter((l) => /^\d{19}$/.test(l)).map((l) => Number(BigInt(l) / 1_000_000n));
    for (let k = 1; k < marks.length; k++) add(`raw step ${k - 1} command`, marks[k]! - marks[k - 1]!);
    if (marks.length) add('raw outside the commands', ms - (marks.at(-1)! - marks[0]!));
    rmSync(ws, { recursive: true, force: true });
    return ms;
  };
  const rounds = Number(process.env.BENCH_SHORT_ROUNDS ?? 5);
  const b: number[] = [];
  const r: number[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      r.push(await raw(i));
      b.push(await berth(i));
    } else {
      b.push(await berth(i));
      r.push(await raw(i));
    }
  }
  for (const [k, v] of [...phases].sort(([a], [b]) => a.localeCompare(b))) console.log(`# short ${k}: ${median(v).toFixed(0)} ms`);
  console.log(`# short project: ${project}`);
  console.log(`# short berth runs ms: ${b.map((x) => x.toFixed(0)).join(' ')}`);
  console.log(`# short raw runs ms: ${r.map((x) => x.toFixed(0)).join(' ')}`);
  report('short_build_vs_raw', median(b) / median(r), 'ratio');
  report('short_build_ms', median(b), 'absolute');
  report('short_raw_build_ms', median(r), 'absolute');
}
