import type { Run, RunState, TaskOutcome } from '../model';
import type { RunTransitionInput } from '../store';

/**
 * The run transitions that follow its root task reaching a terminal outcome, as legal edges of
 * the run state machine. A run never enters a final state while an effect is unresolved: it goes
 * to `needs_reconciliation`, naming the effects (the store checks the same inside the commit).
 */
export function runTransitionsForRoot(
  run: Run,
  outcome: TaskOutcome,
  unresolvedEffects: string[],
  actor: string,
  detail: string,
): RunTransitionInput[] {
  const out: RunTransitionInput[] = [];
  let state: RunState = run.state;
  const go = (to: RunState, reason: string) => {
    out.push({ runId: run.id, from: state, to, actor, reason });
    state = to;
  };
  const unresolved = unresolvedEffects.length
    ? `unresolved effects: ${unresolvedEffects.join(', ')}${detail ? ` (${detail})` : ''}`
    : '';

  if (state === 'admitted') go('running', 'root task started');
  // A retry that never got its answer (budget spent, or cancelled while waiting) ends the wait first.
  if (state === 'retry_wait') go('running', 'retry wait ended');
  if (state === 'waiting_for_input' || state === 'awaiting_approval') {
    if (outcome === 'cancelled') go('cancelling', detail || 'cancelled while waiting');
    else go('running', 'root task settled');
  }
  if (state === 'running' && outcome === 'cancelled') go('cancelling', 'root task cancelled');
  if (state === 'cancelling') {
    go(unresolved ? 'needs_reconciliation' : 'cancelled', unresolved || detail || 'root task cancelled');
    return out;
  }
  if (state === 'reconciling') {
    // The operator's decision is being carried out; anything still uncertain goes back to the
    // operator rather than ending the run.
    if (unresolved) go('needs_reconciliation', unresolved);
    else if (outcome === 'cancelled') go('cancelled', detail || 'root task cancelled');
    else if (outcome === 'ok' && !unresolved) go('completed', detail || 'root task completed after reconciliation');
    else go('failed', unresolved || detail || `root task ended ${outcome} during reconciliation`);
    return out;
  }
  if (state !== 'running') return out;
  switch (outcome) {
    case 'ok':
      go(unresolved ? 'needs_reconciliation' : 'completed', unresolved || detail || 'root task completed');
      break;
    case 'error': {
      // running -> failed is not an edge: a failure always passes through compensating. Berth
      // registers no undo actions, so the pass compensates nothing, and the log says so rather
      // than suggesting something was rolled back.
      const cause = detail || 'root task failed';
      go('compensating', `${cause}; nothing to compensate: Berth keeps no undo actions for this run`);
      go(unresolved ? 'needs_reconciliation' : 'failed', unresolved || `${cause} (nothing was compensated)`);
      break;
    }
    case 'interrupted':
      go('needs_reconciliation', detail || 'root task interrupted');
      break;
  }
  return out;
}
