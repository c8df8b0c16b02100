import { afterEach, describe, expect, it } from 'vitest';
import { describeRun } from '../../host/cli/commands/runs';
import { tempStore } from '../support/temp-store';
import { countingStore } from '../support/counting-store';

let t: ReturnType<typeof tempStore> | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

const N = 250;

/** A run with a root task and N step tasks, effects and snapshots, committed as a long plan run commits them. */
async function longRun() {
  t = tempStore();
  const store = t.store;
  await store.commit({
    sessionId: 'ses_long',
    label: 'start',
    createSession: {},
    runs: [{ id: 'run_long', kind: 'test', submissionId: null, rootTaskId: 'root', versions: { kernel: '0.1.0' } }],
    tasks: [{ id: 'root', runId: 'run_long', parentId: null, kind: 'job', kindVersion: 1, phase: 'step', input: { steps: N } }],
  });
  for (let i = 0; i < N; i++) {
    const id = `task_${String(i).padStart(4, '0')}`;
    await store.commit({
      sessionId: 'ses_long',
      label: 'step',
      tasks: [{ id, runId: 'run_long', parentId: 'root', kind: 'plan-step', kindVersion: 1, phase: 'run', input: { index: i, generation: 0 } }],
      effects: [{ id: `eff_${String(i).padStart(4, '0')}`, create: { runId: 'run_long', taskId: id, kind: 'plan.step', intent: { i }, replay: 'safe' } }],
      snapshots: [{ id: `snap_${String(i).padStart(4, '0')}`, runId: 'run_long', taskId: id, leaseId: 'lease_1', imageId: 'sha256:x', workspaceDigest: 'sha256:y', sizeBytes: 0, checkpoint: `step:${i}:s${i}`, parentId: null }],
    });
  }
  return store;
}

describe('the description of a long run for a page', () => {
  it('holds the newest tasks (with the root first), effects and snapshots, says older ones exist, and reads one task more than it shows', async () => {
    const store = await longRun();
    const counting = countingStore(store);
    const d = await describeRun(counting.store, 'run_long', { newest: 100 });
    expect(d.tasks.map((x) => x.id)).toEqual(['root', ...Array.from({ length: 100 }, (_, i) => `task_${String(N - 100 + i).padStart(4, '0')}`)]);
    expect(d.effects.map((e) => e.id)).toEqual(Array.from({ length: 100 }, (_, i) => `eff_${String(N - 100 + i).padStart(4, '0')}`));
    expect(d.snapshots.map((s) => s.id)).toEqual(Array.from({ length: 100 }, (_, i) => `snap_${String(N - 100 + i).padStart(4, '0')}`));
    expect(d.shown).toEqual({ newest: 100, olderTasks: true, olderEffects: true, olderSnapshots: true });
    // One more than the page (to know there are older ones): never every task of the run. (The
    // cost summary beside it still reads the run's effects and snapshots: issue 32, left.)
    expect(counting.rows.get('listTasks')).toBe(101);
  });

  it('holds every task, effect and snapshot when no page is asked for (berth show --all, --json)', async () => {
    const store = await longRun();
    const d = await describeRun(store, 'run_long');
    expect([d.tasks.length, d.effects.length, d.snapshots.length]).toEqual([N + 1, N, N]);
    expect(d.shown).toEqual({ newest: null, olderTasks: false, olderEffects: false, olderSnapshots: false });
  });
});
