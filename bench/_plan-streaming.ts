/**
 * plan.streaming_output_vs_buffered: `berth run` of one step printing 50 MB in 100-character
 * lines, with its output written to the store while it runs (host/output, the default) vs only the
 * receipt's tails (`BERTH_LIVE_OUTPUT=off`, the capture before live output); rounds alternate which
 * goes first, ratio of medians.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Report } from './run';
import { median } from './_stats';

const BYTES = 50_000_000;
const STEP = `yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c ${BYTES}`;

async function runOnce(cli: string, dir: string, mode: 'streamed' | 'buffered', round: number, hostId: string): Promise<number> {
  const plan = join(dir, 'streaming.yaml');
  writeFileSync(plan, `name: streaming\nenvironment: env.yaml\nworkspace: streaming-ws\nsteps:\n  - { name: print, run: "${STEP}", replay: safe }\n`);
  const t0 = performance.now();
  const env = { ...process.env, BERTH_HOST_ID: hostId, ...(mode === 'buffered' ? { BERTH_LIVE_OUTPUT: 'off' } : {}) };
  const child = spawn(process.execPath, [cli, 'run', plan, '--store', join(dir, `streaming-${mode}-${round}.db`)], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let tail = '';
  child.stderr.on('data', (c: Buffer) => (tail = (tail + c.toString()).slice(-2000)));
  const code = await new Promise<number>((res) => child.on('close', (c) => res(c ?? -1)));
  if (code !== 0) throw new Error(`berth run (${mode}) exited ${code}: ${tail}`);
  return performance.now() - t0;
}

/** `dir` holds the plan bench's env.yaml, `root` is the checkout. */
export async function streamingOutput(root: string, dir: string, hostId: string, report: Report, rounds = Number(process.env.BENCH_STREAMING_ROUNDS ?? 3)): Promise<void> {
  const cli = join(root, 'host/cli/bin.mjs');
  mkdirSync(join(dir, 'streaming-ws'), { recursive: true });
  writeFileSync(join(dir, 'streaming-ws', 'README'), 'streaming\n');
  const ms: Record<'streamed' | 'buffered', number[]> = { streamed: [], buffered: [] };
  for (let i = 0; i < rounds; i++) {
    const order: Array<'streamed' | 'buffered'> = i % 2 === 0 ? ['streamed', 'buffered'] : ['buffered', 'streamed'];
    for (const mode of order) ms[mode].push(await runOnce(cli, dir, mode, i, hostId));
  }
  report('streaming_output_vs_buffered', median(ms.streamed) / median(ms.buffered), 'ratio');
  report('streaming_output_ms', median(ms.streamed), 'absolute');
  report('buffered_output_ms', median(ms.buffered), 'absolute');
}
