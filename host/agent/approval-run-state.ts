import type { Task } from '../model';
import type { RunTransitionInput, Store } from '../store';

/**
 * The run goes back from `awaiting_approval` to `running` with the decision that closes its last
 * open approval request; while another call of the run still waits, it stays where it is.
 */
export async function runResumeTransition(store: Store, decidedTask: Task, reason: string, actor: string): Promise<RunTransitionInput[]> {
  if (!decidedTask.runId) return [];
  const run = await store.getRun(decidedTask.runId);
  if (run?.state !== 'awaiting_approval') return [];
  const others = (await store.listTasks({ runId: run.id, statuses: ['waiting'] })).filter((t) => t.id !== decidedTask.id && t.wait?.signal === 'approval');
  if (others.length) return [];
  return [{ runId: run.id, from: 'awaiting_approval', to: 'running', actor, reason }];
}
