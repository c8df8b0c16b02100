/**
 * plan.long_line_vs_lines: `berth run` (the CLI as a user runs it, live progress on stderr) of one
 * step printing 48 MiB on one line vs one printing the same bytes in 100-character lines; rounds
 * alternate which goes first, ratio of medians. Also each side's peak RSS (VmHWM of the CLI
 * process, read every 50 ms), the figure issue 25 bounds at 300 MB.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Report } from './run';
import { median } from './_stats';

const BYTES = 48 << 20;
const STEPS = {
  long_line: `head -c ${BYTES} /dev/zero | tr '\\\\0' a; echo`,
  lines: `yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c ${BYTES}`,
} as const;

const hwmMb = (pid: number): number => Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

async function runOnce(cli: string, dir: string, kind: keyof typeof STEPS, round: number, hostId: string): Promise<{ ms: number; rssMb: number }> {
  const plan = join(dir, `output-${kind}.yaml`);
  writeFileSync(plan, `name: output\nenvironment: env.yaml\nworkspace: output-ws\nsteps:\n  - { name: print, run: "${STEPS[kind]}", replay: safe }\n`);
  const t0 = performance.now();
  const child = spawn(process.execPath, [cli, 'run', plan, '--store', join(dir, `output-${kind}-${round}.db`)], { cwd: dir, env: { ...process.env, BERTH_HOST_ID: hostId }, stdio: ['ignore', 'ignore', 'pipe'] });
  let rssMb = 0;
  const poll = setInterval(() => {
    try {
      rssMb = Math.max(rssMb, hwmMb(child.pid!));
    } catch {
      // gone
    }
  }, 50);
  let tail = '';
  child.stderr.on('data', (c: Buffer) => (tail = (tail + c.toString()).slice(-2000)));
  const code = await new Promise<number>((res) => child.on('close', (c) => res(c ?? -1)));
  clearInterval(poll);
  if (code !== 0) throw new Error(`berth run (${kind}) exited ${code}: ${tail}`);
  return { ms: performance.now() - t0, rssMb };
}

/** The long-line figures; `dir` holds the plan bench's env.yaml, `root` is the checkout. */
export async function outputShapes(root: string, dir: string, hostId: string, report: Report, rounds = 3): Promise<void> {
  const cli = join(root, 'host/cli/bin.mjs');
  mkdirSync(join(dir, 'output-ws'), { recursive: true });
  writeFileSync(join(dir, 'output-ws', 'README'), 'output shapes\n');
  const runs: Record<keyof typeof STEPS, Array<{ ms: number; rssMb: number }>> = { long_line: [], lines: [] };
  for (let i = 0; i < rounds; i++) {
    const order: Array<keyof typeof STEPS> = i % 2 === 0 ? ['long_line', 'lines'] : ['lines', 'long_line'];
    for (const kind of order) runs[kind].push(await runOnce(cli, dir, kind, i, hostId));
  }
  const ms = (k: keyof typeof STEPS) => median(runs[k].map((r) => r.ms));
  report('long_line_vs_lines', ms('long_line') / ms('lines'), 'ratio');
  report('long_line_ms', ms('long_line'), 'absolute');
  report('lines_ms', ms('lines'), 'absolute');
  report('long_line_rss_mb', Math.max(...runs.long_line.map((r) => r.rssMb)), 'absolute');
  report('lines_rss_mb', Math.max(...runs.lines.map((r) => r.rssMb)), 'absolute');
}
