import { BerthError } from '../errors';
import type { AcceptanceDecision, Json, Run } from '../model';
import type { Store } from '../store';
import { newId } from '../support';
import { runNotFound } from '../store/missing-run';

/**
 * A run's acceptance as `berth show` reports it. `none`: the run is not completed (only a
 * completed run is judged); `pending`: completed, nobody has judged it yet. The newest decision
 * wins; all of them stay on the record.
 */
export interface AcceptanceView {
  state: 'none' | 'pending' | 'accepted' | 'rejected';
  actor: string | null;
  at: number | null;
  reason: string | null;
  evidence: Json;
  /** How many decisions the run has (an operator may overrule the command, or change their mind). */
  decisions: number;
}

/** The acceptance of `run` from its recorded decisions. */
export async function acceptanceOf(store: Store, run: Run): Promise<AcceptanceView> {
  const decisions = await store.listAcceptance({ runId: run.id });
  const last = decisions.at(-1);
  if (last) return { state: last.decision, actor: last.actor, at: last.at, reason: last.reason, evidence: last.evidence, decisions: decisions.length };
  return { state: run.state === 'completed' ? 'pending' : 'none', actor: null, at: null, reason: null, evidence: null, decisions: 0 };
}

export interface DecideAcceptance {
  runId: string;
  decision: 'accepted' | 'rejected';
  /** `user:NAME`. */
  actor: string;
  reason: string | null;
  /** The same request id asked again returns the first decision and records nothing. */
  requestId: string;
}

/**
 * Records an operator's acceptance decision through a commit. Only a completed run is judged;
 * the run state is never touched (a rejected run stays `completed`, and can be re-run or forked).
 * Idempotent by request id: a retried command returns the decision its first attempt recorded.
 */
export async function decideAcceptance(store: Store, o: DecideAcceptance): Promise<{ decision: AcceptanceDecision; repeated: boolean }> {
  const before = await store.findAcceptance(o.requestId);
  if (before) {
    if (before.runId !== o.runId || before.decision !== o.decision) {
      throw new BerthError('request_id_reused', `request id ${o.requestId} already recorded ${before.decision} for run ${before.runId}; use a new request id for another decision`, { ids: { runId: o.runId } });
    }
    return { decision: before, repeated: true };
  }
  const run = await store.getRun(o.runId);
  if (!run) throw await runNotFound(store, o.runId);
  if (run.state !== 'completed') {
    throw new BerthError('run_not_completed', `run ${run.id} is ${run.state}: acceptance judges a completed run's outcome (a failed or cancelled run has none to accept)`, { ids: { runId: run.id } });
  }
  const id = newId('acc');
  const r = await store.commit({
    sessionId: run.sessionId,
    label: `acceptance.${o.decision}`,
    actor: o.actor,
    acceptance: [{ id, runId: run.id, requestId: o.requestId, decision: o.decision, actor: o.actor, reason: o.reason, evidence: { by: 'operator' } }],
  });
  if (!r.ok) throw new BerthError('commit_conflict', `acceptance of run ${run.id} not recorded: ${r.conflict.kind}`, { retryable: true, ids: { runId: run.id } });
  const decision = await store.findAcceptance(o.requestId);
  if (!decision) throw new BerthError('commit_conflict', `acceptance of run ${run.id} committed but not found`, { ids: { runId: run.id } });
  // Same request id raced in by another request (the store kept its row, not ours): that one stands.
  return { decision, repeated: decision.id !== id };
}
