import { afterAll, describe, expect, it } from 'vitest';
import { forkPointsInUse } from '../../host/fork';
import type { Json } from '../../host/model';
import { countingStore } from '../support/counting-store';
import { STORE_KINDS, stopSharedPostgres, freshStores } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

describe.each(STORE_KINDS)('the fork points retention keeps, asked while a long plan runs, on %s', (kind) => {
  const fresh = freshStores(kind);

  // Retention asks this at each of its passes (every 48 commits of a running run): it read every run
  // of the store and validated each open plan run's whole input, a long plan's every step each time.
  it('reads the open runs only and, of each, only the fork point its input names', async () => {
    const { store } = await fresh();
    const run = (id: string, root: string) => ({ id, kind: 'plan', submissionId: null, rootTaskId: root, versions: { kernel: 'k1' } });
    const task = (id: string, runId: string, input: Json) => ({ id, runId, parentId: null, kind: 'plan', kindVersion: 1, phase: 'p', input });
    // Five finished runs, then the long run (no fork) and a fork of it, both open. The inputs hold
    // only what is read: a whole input's validation would refuse them.
    for (let i = 1; i <= 5; i++) {
      const id = `run_done${i}`;
      await store.commit({ sessionId: `s${i}`, label: 'submit', createSession: {}, runs: [run(id, `task_done${i}`)], tasks: [task(`task_done${i}`, id, { planFile: 'p.yaml' })] });
      await store.commit({ sessionId: `s${i}`, label: 'go', runTransitions: [{ runId: id, from: 'admitted', to: 'running', actor: 'a', reason: 'go' }] });
      await store.commit({ sessionId: `s${i}`, label: 'end', runTransitions: [{ runId: id, from: 'running', to: 'completed', actor: 'a', reason: 'done' }] });
    }
    const steps = Array.from({ length: 3000 }, (_, i) => ({ name: `s${i}`, run: `echo ${i}` }));
    await store.commit({ sessionId: 'long', label: 'submit', createSession: {}, runs: [run('run_long', 'task_long')], tasks: [task('task_long', 'run_long', { planFile: 'p.yaml', plan: { steps } })] });
    const fork = { runId: 'run_long', snapshotId: 'snap_7', checkpoint: 'step:7', index: 8 };
    await store.commit({ sessionId: 'forked', label: 'submit', createSession: {}, runs: [run('run_fork', 'task_fork')], tasks: [task('task_fork', 'run_fork', { planFile: 'p.yaml', fork })] });
    const c = countingStore(store);
    expect([...(await forkPointsInUse(c.store))]).toEqual(['snap_7']);
    expect(c.rows.get('listRuns')).toBe(2);
  });

  it('refuses a fork point stored in another shape, naming the task', async () => {
    const { store } = await fresh();
    await store.commit({
      sessionId: 'forked',
      label: 'submit',
      createSession: {},
      runs: [{ id: 'run_bad', kind: 'plan', submissionId: null, rootTaskId: 'task_bad', versions: { kernel: 'k1' } }],
      tasks: [{ id: 'task_bad', runId: 'run_bad', parentId: null, kind: 'plan', kindVersion: 1, phase: 'p', input: { fork: { runId: 'run_x', index: -1 } } }],
    });
    await expect(forkPointsInUse(store)).rejects.toThrow(/task_bad/);
  });
});
