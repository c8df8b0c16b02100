/**
 * fleet (issue 15): several worker processes on one store (SQLite here, several processes on one
 * machine). Each figure is its own function so other stores' figures can sit beside them.
 *
 * - takeover_after_ttl_s: from SIGKILL of the owner of a running run to the first commit of that
 *   run by the other worker, minus the lease TTL (the part that is not waiting for the lease).
 * - two_workers_vs_one, three_workers_vs_one: 200 short kernel-only runs (3 phases, no sandbox)
 *   driven to the end by two (three) worker processes vs one, as throughput (runs/s) ratio, with
 *   each worker's CPU beside it; `pg_` the same on the PostgreSQL store (bench/_fleet-pg.ts).
 * - cross_engine_pause_s: a take-over across two engines through the registry (bench/_fleet-pause.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../host/store';
import { bundleScript } from '../test/support/bundle-script';
import type { Report } from './run';
import { crossEnginePause } from './_fleet-pause';
import { pgFigures } from './_fleet-pg';
import { sleep, startWorker, stopAll, submitRuns, workersVsOne } from './_fleet-scaling';

export async function takeoverAfterTtl(report: Report, script: string, dir: string): Promise<void> {
  const ttl = 2000;
  const path = join(mkdtempSync(join(dir, 'takeover-')), 'fleet.db');
  const [runId] = await submitRuns(path, 'fleet-stepper', 1);
  const reader = await openStore(path);
  // Two host ids, as two machines: the survivor must wait for the lease (on one machine it would
  // see the owner's process gone and take over at once).
  const a = await startWorker(script, path, ttl, 1, 'bench-a');
  const b = await startWorker(script, path, ttl, 1, 'bench-b');
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
    await crossEnginePause(report);
    let n = 0;
    await workersVsOne(report, script, '', async () => join(mkdtempSync(join(dir, `w${++n}-`)), 'fleet.db'));
    await pgFigures(report, script);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
