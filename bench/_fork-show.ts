/**
 * What `berth show RUN` and `berth tree RUN` cost in a store of many runs: the run's forks are one
 * indexed lookup (`listForks`), not a read of every run's root input. Shared by bench/fork.ts; needs
 * no Docker engine (the runs are committed as a plan submit writes them, never driven).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeRun } from '../host/cli/commands/runs';
import { lineageOf } from '../host/fork';
import { plainJson } from '../host/model';
import { loadPlan, PLAN_KIND, PlanRunInputSchema } from '../host/plan';
import { openSqliteStore } from '../host/store';
import { newId } from '../host/support';
import { median, timed } from './_stats';

/** `runs` plan runs, one in every `forkEvery` a fork of the first; medians of 5 over `berth show` and `berth tree` of the first. */
export async function showAmongRuns(dir: string, runs: number, forkEvery = 1000): Promise<{ showMs: number; treeMs: number; forks: number }> {
  mkdirSync(join(dir, 'ws'), { recursive: true });
  writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "sha256:${'0'.repeat(64)}" }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`);
  writeFileSync(join(dir, 'plan.yaml'), 'name: bench-show\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: one\n    run: "true"\n  - name: two\n    run: "true"\n');
  const loaded = await loadPlan(join(dir, 'plan.yaml'));
  const base = { planFile: loaded.file, plan: loaded.plan, environment: loaded.environment, envFingerprint: loaded.envFingerprint, workspaceDir: loaded.workspaceDir };
  // Setup only: the figure is the reads, so the setup commits skip the per-commit fsync.
  const store = openSqliteStore(join(dir, 'show.db'), { durability: 'normal' });
  try {
    const first = newId('run');
    let forks = 0;
    for (let i = 0; i < runs; i++) {
      const runId = i === 0 ? first : newId('run');
      const fork = i > 0 && i % forkEvery === 0 ? { runId: first, snapshotId: 'snap_bench', checkpoint: 'step:0:one', index: 1 } : undefined;
      if (fork) forks++;
      const taskId = newId('task');
      const input = plainJson(PlanRunInputSchema.parse({ ...base, ...(fork ? { fork } : {}) }));
      const r = await store.commit({
        sessionId: newId('ses'),
        label: 'submit',
        createSession: { meta: { plan: loaded.file, name: 'bench-show', ...(fork ? { forkedFrom: fork } : {}) } },
        runs: [{ id: runId, kind: 'plan', submissionId: null, rootTaskId: taskId, versions: {}, forkedFromRunId: fork ? first : null }],
        tasks: [{ id: taskId, runId, parentId: null, kind: PLAN_KIND, kindVersion: 1, phase: 'start', input }],
      });
      if (!r.ok) throw new Error(`bench setup commit refused: ${r.conflict.kind}`);
    }
    const shows: number[] = [];
    const trees: number[] = [];
    for (let i = 0; i < 6; i++) {
      const [showMs, shown] = await timed(() => describeRun(store, first));
      const [treeMs, tree] = await timed(() => lineageOf(store, first));
      if (shown.forks.length !== forks || tree.root.children.length !== forks) throw new Error(`bench: ${shown.forks.length}/${tree.root.children.length} forks found, ${forks} committed`);
      if (i > 0) shows.push(showMs), trees.push(treeMs); // the first is a warm-up
    }
    return { showMs: median(shows), treeMs: median(trees), forks };
  } finally {
    await store.close();
  }
}
