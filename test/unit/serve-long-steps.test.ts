import { describe, expect, it } from 'vitest';
import type { Task } from '../../host/model';
import { STEP_KIND } from '../../host/plan';
import type { RunDescription } from '../../host/serve';
import { stepsOf } from '../../host/serve/run-view';

const task = (id: string, o: Partial<Task>): Task => ({ id, runId: 'run_long', sessionId: 'ses_long', parentId: null, kind: STEP_KIND, kindVersion: 1, version: 1, phase: null, status: 'terminal', outcome: 'ok', input: null, checkpoint: null, result: null, error: null, attempts: 0, restarts: 0, createdAt: 0, updatedAt: 0, ...o }) as unknown as Task;

/** A plan of `steps` steps whose description holds only the step tasks `from` to `to` (a page of the newest tasks), and the root. */
function description(steps: number, from: number, to: number, older: boolean): RunDescription {
  const root = task('task_root', { kind: 'plan', input: { plan: { steps: Array.from({ length: steps }, (_, i) => ({ name: `s${i}`, run: 'true' })) } } as never });
  const tasks = [root, ...Array.from({ length: to - from }, (_, k) => task(`task_${from + k}`, { parentId: 'task_root', input: { index: from + k, generation: 0 } as never, result: { step: `s${from + k}`, exitCode: 0, durationMs: 1, stdoutTail: '', stderrTail: '', snapshotId: null } as never }))];
  return { run: { id: 'run_long', rootTaskId: 'task_root', kind: 'plan', state: 'running' }, tasks, shown: { olderTasks: older, olderEffects: older, olderSnapshots: older } } as unknown as RunDescription;
}

describe('the run page of a long plan', () => {
  it('lists the steps of the newest tasks read and the next 20 pending ones, counting the rest: finished steps older than the page are never shown as pending', () => {
    const { steps, notShown } = stepsOf(description(3000, 1400, 1500, true), []);
    expect(steps.map((s) => s.index)).toEqual(Array.from({ length: 120 }, (_, i) => 1400 + i));
    expect(steps.slice(0, 100).every((s) => s.state === 'ok')).toBe(true);
    expect(steps.slice(100).every((s) => s.state === 'pending')).toBe(true);
    expect(notShown).toEqual({ earlier: 1400, later: 1480 });
  });

  it('lists every step of a short plan whose tasks were all read', () => {
    const { steps, notShown } = stepsOf(description(12, 0, 5, false), []);
    expect(steps.map((s) => [s.index, s.state])).toEqual(Array.from({ length: 12 }, (_, i) => [i, i < 5 ? 'ok' : 'pending']));
    expect(notShown).toEqual({ earlier: 0, later: 0 });
  });
});
