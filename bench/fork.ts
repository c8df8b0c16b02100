/**
 * fork: what forking a run costs, against what it replaces.
 *
 * - vs_raw_start: `berth fork` in process up to its first step starting (fork point resolved,
 *   submit commit, the host claims the run, lease from the checkpoint's snapshot image, the
 *   workspace verified against the snapshot's digest) vs raw dockerode create + start of a
 *   container from the same snapshot image with the same create options. Interleaved, medians of 7.
 * - history_10k_vs_100: the same fork of a run that has 10,000 entries vs one with 100 (history
 *   is referenced by the fork, never copied or re-executed). Interleaved, medians of 5.
 * - show_10k_runs_ms / tree_10k_runs_ms: `berth show RUN` (its data) and `berth tree RUN` of a run
 *   with 9 forks in a store of 10,000 plan runs (forks are an indexed lookup; before schema 15 each
 *   read every run's root input). No Docker; medians of 5 after a warm-up.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { planFork, submitFork } from '../host/fork';
import { submitPlan, loadPlan, type PlanProgress } from '../host/plan';
import { createHostRuntime } from '../host/runtime/host-runtime';
import { sandboxSpecOf } from '../host/runtime/sandbox-spec';
import { containerCreateOptions, createSandboxHost, snapshotEngine } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { newId, systemClock } from '../host/support';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { removeHostArtifacts } from '../test/support/plan-fixture';
import { showAmongRuns } from './_fork-show';
import { median, timed } from './_stats';
import type { Report } from './run';

export default async function forkBench(report: Report): Promise<void> {
  const showDir = mkdtempSync(join(tmpdir(), 'berth-bench-fork-show-'));
  try {
    const shown = await showAmongRuns(showDir, 10_000);
    report('show_10k_runs_ms', shown.showMs, 'absolute');
    report('tree_10k_runs_ms', shown.treeMs, 'absolute');
  } finally {
    rmSync(showDir, { recursive: true, force: true });
  }
  const docker = await requireEngine();
  const image = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-fork-'));
  const hostId = newId('benchfork');
  const store = openSqliteStore(join(dir, 'bench.db'));
  const logger = pino({ level: process.env.BENCH_FORK_DEBUG ? 'debug' : 'warn' }, process.env.BENCH_FORK_DEBUG ? pino.destination(process.env.BENCH_FORK_DEBUG) : undefined);
  // When each run's first step started (performance.now()).
  const firstStep = new Map<string, number>();
  const onProgress = (p: PlanProgress) => {
    if (p.type === 'step-start' && !firstStep.has(p.runId)) firstStep.set(p.runId, performance.now());
  };
  const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
  const engine = snapshotEngine(docker);
  const rt = createHostRuntime({ store, sandbox, engine, clock: systemClock, logger, hostId, onProgress });
  try {
    mkdirSync(join(dir, 'ws'));
    for (let i = 0; i < 50; i++) writeFileSync(join(dir, 'ws', `f${i}.txt`), `file ${i}\n`.repeat(200));
    writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`);
    writeFileSync(join(dir, 'plan.yaml'), 'name: bench-fork\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: one\n    run: "echo 1 > a"\n  - name: two\n    run: "true"\n');
    const loaded = await loadPlan(join(dir, 'plan.yaml'));
    await rt.kernel.start();
    const finish = (runId: string) => rt.kernel.waitForRun(runId, { states: ['completed', 'failed', 'needs_reconciliation'] });
    const original = async (entries: number) => {
      const { run } = await submitPlan(rt, loaded);
      await finish(run.id);
      for (let done = 0; done < entries; done += 1000) {
        const n = Math.min(1000, entries - done);
        await store.commit({ sessionId: run.sessionId, label: 'bench.history', entries: Array.from({ length: n }, (_, i) => ({ id: newId('ent'), runId: run.id, kind: 'bench.note', body: { i: done + i, text: 'x'.repeat(200) } })) });
      }
      return run;
    };
    // Up to the first step starting; then the fork runs its one step to the end, off the clock.
    const fork = async (run: Awaited<ReturnType<typeof original>>) => {
      const t0 = performance.now();
      const planned = await planFork({ store, imageExists: engine.imageExists }, run, { at: 'one' });
      const { run: f } = await submitFork(rt, planned, { actor: 'bench' });
      await finish(f.id);
      return firstStep.get(f.id)! - t0;
    };
    const small = await original(100);
    const big = await original(10_000);
    const snap = (await store.listSnapshots({ runId: small.id })).find((s) => s.checkpoint.startsWith('step:0:'))!;
    const spec = { ...sandboxSpecOf(loaded.environment), imageDigest: snap.imageId };
    const raw = async () => {
      const [ms, c] = await timed(async () => {
        const c = await docker.createContainer(containerCreateOptions(spec, { 'berth.host': hostId, 'berth.bench': 'fork-raw' }));
        await c.start();
        return c;
      });
      await c.remove({ force: true });
      return ms;
    };
    await fork(small); // warm-up
    await raw();
    const forks: number[] = [];
    const raws: number[] = [];
    for (let i = 0; i < 7; i++) {
      if (i % 2) raws.push(await raw());
      forks.push(await fork(small));
      if (i % 2 === 0) raws.push(await raw());
    }
    process.stdout.write(`# fork to first step ${median(forks).toFixed(0)} ms, raw create+start ${median(raws).toFixed(0)} ms\n`);
    report('vs_raw_start', median(forks) / median(raws), 'ratio');
    const tenK: number[] = [];
    const hundred: number[] = [];
    for (let i = 0; i < 5; i++) {
      const order = i % 2 ? [big, small] : [small, big];
      for (const r of order) (r === big ? tenK : hundred).push(await fork(r));
    }
    process.stdout.write(`# fork of a run with 10,000 entries ${median(tenK).toFixed(0)} ms, with 100 ${median(hundred).toFixed(0)} ms\n`);
    report('history_10k_vs_100', median(tenK) / median(hundred), 'ratio');
  } finally {
    await rt.kernel.stop();
    await sandbox.close?.();
    await removeHostArtifacts(docker, hostId);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
