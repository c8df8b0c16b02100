/**
 * fleet (issue 15): several worker processes on one store (SQLite here, several processes on one
 * machine). Each figure is its own function so other stores' figures can sit beside them.
 *
 * - takeover_after_ttl_s: from SIGKILL of the owner of a running run to the first commit of that
 *   run by the other worker, minus the lease TTL (the part that is not waiting for the lease).
 * - two_workers_vs_one: 200 short kernel-only runs (3 phases, no sandbox) driven to the end by two
 *   worker processes vs one, as throughput (runs/s) ratio.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../host/kernel';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { bundleScript } from '../test/support/bundle-script';
import { registerFleetKinds } from './_fleet-kinds';
import type { Report } from './run';
import { pgFigures } from './_fleet-pg';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function submitRuns(path: string, kind: string, n: number): Promise<string[]> {
  const store = openSqliteStore(path);
  const registry = new HandlerRegistry();
  registerFleetKinds(registry);
  // Unstarted, per-session: it only writes submissions (which create their sessions, unfenced).
  const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'bench-submit', ownership: { leaseTtlMs: 1000 } });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await submit({ store, kernel, registry }, { requestId: `r${i}`, runKind: 'bench', root: { kind, input: {} } })).run.id);
  await store.close();
  return ids;
}

async function startWorker(script: string, path: string, ttl: number, concurrency: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script, path, String(ttl), String(concurrency)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
  return child;
}

const stopAll = async (children: ChildProcess[]) => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode !== null || c.signalCode !== null ? undefined : new Promise((r) => c.once('exit', r)))));
};

/** Runs/s of `workers` processes driving 200 short runs to the end. */
async function throughput(script: string, dir: string, workers: number): Promise<number> {
  const path = join(mkdtempSync(join(dir, `w${workers}-`)), 'fleet.db');
  const ids = await submitRuns(path, 'fleet-short', 200);
  const reader = openSqliteStore(path);
  const t0 = performance.now();
  const children = await Promise.all(Array.from({ length: workers }, () => startWorker(script, path, 5000, 8)));
  try {
    for (;;) {
      const done = (await reader.listRuns({ states: ['completed'] })).length;
      if (done === ids.length) break;
      await sleep(20);
    }
    return ids.length / ((performance.now() - t0) / 1000);
  } finally {
    await stopAll(children);
    await reader.close();
  }
}

export async function twoWorkersVsOne(report: Report, script: string, dir: string): Promise<void> {
  const one = await throughput(script, dir, 1);
  const two = await throughput(script, dir, 2);
  report('one_worker_runs_per_s', one, 'absolute');
  report('two_workers_runs_per_s', two, 'absolute');
  report('two_workers_vs_one', two / one, 'ratio');
}

export async function takeoverAfterTtl(report: Report, script: string, dir: string): Promise<void> {
  const ttl = 2000;
  const path = join(mkdtempSync(join(dir, 'takeover-')), 'fleet.db');
  const [runId] = await submitRuns(path, 'fleet-stepper', 1);
  const reader = openSqliteStore(path);
  const a = await startWorker(script, path, ttl, 1);
  const b = await startWorker(script, path, ttl, 1);
  try {
    const run = (await reader.getRun(runId!))!;
    let owner;
    while (!(owner = await reader.getSessionOwner(run.sessionId)) || (await reader.listCommits(run.sessionId)).length < 20) await sleep(20);
    const victim = [a, b].find((c) => c.pid === owner!.pid)!;
    const killedAt = Date.now();
    victim.kill('SIGKILL');
    for (;;) {
      const now = await reader.getSessionOwner(run.sessionId);
      if (now && now.epoch > owner.epoch) {
        const first = (await reader.listCommits(run.sessionId)).find((c) => c.at >= now.takenAt);
        if (first) {
          report('takeover_s', (first.at - killedAt) / 1000, 'absolute');
          report('takeover_after_ttl_s', (first.at - killedAt - ttl) / 1000, 'absolute');
          return;
        }
      }
      await sleep(10);
    }
  } finally {
    await stopAll([a, b]);
    await reader.close();
  }
}

export default async function fleetBench(report: Report): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-fleet-'));
  try {
    const script = await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts'));
    await takeoverAfterTtl(report, script, dir);
    await twoWorkersVsOne(report, script, dir);
    await pgFigures(report);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
