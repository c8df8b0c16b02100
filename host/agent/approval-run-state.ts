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
  // Whether another call still waits is decided inside the commit: two decisions at once (an
  // approval and an expiry) would each see the other still waiting here.
  return [{ runId: run.id, from: 'awaiting_approval', to: 'running', actor, reason, unlessWaiting: 'approval' }];
}
