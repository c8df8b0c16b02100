import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { describeRun } from '../../host/cli/commands/runs';
import { plainJson } from '../../host/model';
import { loadPlan, PLAN_KIND, PlanRunInputSchema } from '../../host/plan';
import { runFragment } from '../../host/serve/run-page';
import { readRunView } from '../../host/serve/run-view';
import { openSqliteStore, type Store } from '../../host/store';

let dir: string | undefined;
let store: Store | undefined;
afterEach(async () => {
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  store = undefined;
  dir = undefined;
});

describe('the run page\'s fork tree', () => {
  it('shows the whole fork tree at every depth from any run in it, the current run marked', async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-tree-'));
    mkdirSync(join(dir, 'ws'));
    writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "sha256:${'0'.repeat(64)}" }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`);
    writeFileSync(join(dir, 'plan.yaml'), 'name: tree\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: one\n    run: "true"\n  - name: two\n    run: "true"\n');
    const loaded = await loadPlan(join(dir, 'plan.yaml'));
    const base = { planFile: loaded.file, plan: loaded.plan, environment: loaded.environment, envFingerprint: loaded.envFingerprint, workspaceDir: loaded.workspaceDir };
    store = openSqliteStore(join(dir, 'b.db'));
    const s = store;
    // a <- b <- c <- d, and a <- e: four levels.
    const parents: Record<string, string | null> = { run_a: null, run_b: 'run_a', run_c: 'run_b', run_d: 'run_c', run_e: 'run_a' };
    for (const [id, parent] of Object.entries(parents)) {
      const fork = parent ? { runId: parent, snapshotId: `snap_${parent}`, checkpoint: 'step:0:one', index: 1 } : undefined;
      const r = await s.commit({
        sessionId: `ses_${id}`,
        label: 'submit',
        createSession: { meta: { plan: 'plan.yaml', name: 'tree', ...(fork ? { forkedFrom: fork } : {}) } },
        runs: [{ id, kind: 'plan', submissionId: null, rootTaskId: `task_${id}`, versions: {}, forkedFromRunId: parent }],
        tasks: [{ id: `task_${id}`, runId: id, parentId: null, kind: PLAN_KIND, kindVersion: 1, phase: 'start', input: plainJson(PlanRunInputSchema.parse({ ...base, ...(fork ? { fork } : {}) })) }],
      });
      expect(r.ok).toBe(true);
    }
    const deps = { store: s, describe: (id: string) => describeRun(s, id), ownerLine: async () => 'owner', actions: {} as never, artifacts: {} as never, operator: 'user:t' };
    const view = await readRunView(deps as never, 'run_c');
    const shape = (n: NonNullable<typeof view.tree>): unknown => [n.runId, n.children.map(shape)];
    expect(shape(view.tree!)).toEqual(['run_a', [['run_b', [['run_c', [['run_d', []]]]]], ['run_e', []]]]);
    const out = runFragment(view, 'csrf').value;
    expect(out).toMatch(/<li data-tree-run="run_c" class="current">.*<li data-tree-run="run_d">/s);
    expect(out).toContain('<li data-tree-run="run_e">');
  });
});
