import { acceptanceOf, decideAcceptance, decideAcceptanceOnce, type AcceptanceView } from '../acceptance';
import { decideApproval } from '../agent';
import { BerthError, isBerthError } from '../errors';
import { isFinalRunState, type AcceptanceDecision, type Run } from '../model';
import { releaseEndedRunLeases } from '../runtime/run-end-leases';
import type { RunTransitionInput, Store } from '../store';
import { newId } from '../support';
import type { HostParts } from './assemble';
import { readHost, type HostView } from './run-driver';
import { runNotFound } from '../store/missing-run';
import { readOwnerClaim, type OwnerClaim } from './owner-claim';

/** The run, or `run_not_found` naming the store. */
export async function getRunOrThrow(store: Store, runId: string): Promise<Run> {
  const run = await store.getRun(runId);
  if (!run) throw await runNotFound(store, runId);
  return run;
}

/** Who drives the run's session now (null when no host ever claimed it). */
export async function ownerOf(p: HostParts, run: Run): Promise<HostView | null> {
  return readHost(p.store, p.clock.now(), p.hostId, run.sessionId);
}

/**
 * The cancel commit: the run goes to `cancelling` with `actor` and its root task is cancelled
 * durably; the host driving it (or the next resume) carries it out.
 */
export async function commitCancel(store: Store, runId: string, actor: string): Promise<RunTransitionInput[]> {
  const run = await getRunOrThrow(store, runId);
  const from = run.state;
  const transitions =
    from === 'running' ? [{ runId, from, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    // Through cancelling: a sibling task may be mid-effect; the run ends once its root task settles.
    : from === 'waiting_for_input' || from === 'awaiting_approval' ? [{ runId, from, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : from === 'admitted' ? [{ runId, from, to: 'running' as const, actor, reason: 'cancel requested before start' }, { runId, from: 'running' as const, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : from === 'retry_wait' ? [{ runId, from, to: 'running' as const, actor, reason: 'cancel requested during a retry wait' }, { runId, from: 'running' as const, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : null;
  if (!transitions) throw new BerthError('run_not_cancellable', `run ${runId} is ${from}; only admitted, running, retrying or waiting runs can be cancelled`, { ids: { runId } });
  const r = await store.commit({ sessionId: run.sessionId, label: 'run.cancel', actor, runTransitions: transitions, cancelTasks: run.rootTaskId ? [run.rootTaskId] : [] });
  if (!r.ok) throw new BerthError('cancel_conflict', `run ${runId} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId } });
  return transitions;
}

/**
 * Cancels a run durably; one cancelled at once (nothing of it was running) gives up its sandboxes now.
 * A run already `cancelled` or `cancelling` is left as it is (no commit, the first cancel's actor
 * stands) and `already` says so: a cancel repeated by a script, or after a `berth cancel` that was
 * killed before it carried the cancellation out, is not an error.
 */
export async function cancel(p: HostParts, runId: string, actor: string): Promise<Cancelled> {
  const before = await getRunOrThrow(p.store, runId);
  if (before.state === 'cancelled' || before.state === 'cancelling') return { run: before, ...(await ownerAndClaim(p, before)), already: before.state };
  const transitions = await commitCancel(p.store, runId, actor);
  if (transitions.some((t) => isFinalRunState(t.to))) await releaseEndedRunLeases(p, [runId]);
  const run = await getRunOrThrow(p.store, runId);
  return { run, ...(await ownerAndClaim(p, run)) };
}

/**
 * What {@link cancel} left: the run, its owner, and the owner's claim when that owner is live: a
 * live owner whose claim is `overdue` (frozen, paused, overloaded) carries nothing out until it
 * runs again or its claim expires and another host takes the run.
 */
export interface Cancelled {
  run: Run;
  owner: HostView | null;
  claim: OwnerClaim | null;
  already?: 'cancelled' | 'cancelling';
}

/** The run's owner and, while that owner is live, its claim (read after it, so never older). */
export async function ownerAndClaim(p: HostParts, run: Run): Promise<{ owner: HostView | null; claim: OwnerClaim | null }> {
  const owner = await ownerOf(p, run);
  return { owner, claim: owner?.live ? await readOwnerClaim(p.store, run.sessionId) : null };
}

/** Approves or denies a tool call waiting for approval (by call id or approval id); the run's owner continues it. */
export async function decideCall(p: HostParts, runId: string, id: string, decision: 'approve' | 'deny', actor: string, digest?: string) {
  const run = await getRunOrThrow(p.store, runId);
  const approval = await decideApproval(p.store, { runId, id, decision, digest, actor, now: p.clock.now() });
  return { approval, owner: await ownerOf(p, run) };
}

/** `accepted by user:ann at … (reason)`, `pending (berth accept RUN / berth reject RUN --reason …)`. */
export function acceptanceLine(a: AcceptanceView, runId?: string): string {
  if (a.state === 'none') return 'none (the run is not completed)';
  if (a.state === 'pending') return `pending${runId ? ` (berth accept ${runId} / berth reject ${runId} --reason …)` : ''}`;
  const ev = a.evidence as { exitCode?: number; outputDigest?: string } | null;
  const evidence = ev && typeof ev.exitCode === 'number' ? `; command exit ${ev.exitCode}, output ${ev.outputDigest ?? '?'}` : '';
  return `${a.state} by ${a.actor} at ${new Date(a.at!).toISOString()}${a.reason ? ` (${a.reason})` : ''}${evidence}`;
}

/** {@link decideAcceptanceOnce}; with `repeat`, the decision already in force is answered as a repeat instead of refused. */
async function decideOnce(store: Store, asked: { runId: string; decision: 'accepted' | 'rejected'; actor: string; reason: string | null }, repeat: boolean): Promise<{ decision: AcceptanceDecision; repeated: boolean }> {
  try {
    return { decision: await decideAcceptanceOnce(store, asked), repeated: false };
  } catch (err) {
    const newest = repeat && isBerthError(err) && err.code === 'already_decided' ? (await store.listAcceptance({ runId: asked.runId })).at(-1) : undefined;
    if (!newest) throw err;
    return { decision: newest, repeated: true };
  }
}

/**
 * The judgement of a completed run (acceptance is apart from the run state): checks the reason,
 * commits the decision as `actor` (a repeated request id is the same decision), reads the acceptance it leaves.
 * `once` (the web view and its API, which have no request id): a request asking for the acceptance
 * the run already has is refused with `already_decided`, a double click included (decide-once.ts);
 * `once: 'repeat'` (`berth accept`/`reject` without `--request-id`) answers it as the repeat it is instead.
 */
export async function judge(store: Store, runId: string, decision: 'accepted' | 'rejected', actor: string, o: { reason?: string; requestId?: string; once?: boolean | 'repeat' } = {}) {
  if (decision === 'rejected' && !o.reason?.trim()) throw new BerthError('usage', 'berth reject RUN needs --reason "why the outcome is not acceptable"');
  await getRunOrThrow(store, runId);
  const asked = { runId, decision, actor, reason: o.reason?.trim() || null };
  const { decision: d, repeated } = o.once && !o.requestId ? await decideOnce(store, asked, o.once === 'repeat') : await decideAcceptance(store, { ...asked, requestId: o.requestId ?? newId('req') });
  const acceptance: AcceptanceView = await acceptanceOf(store, await getRunOrThrow(store, runId));
  const line = `${repeated ? 'already recorded: ' : ''}${d.decision} run ${runId} as ${d.actor}${d.reason ? ` (${d.reason})` : ''}; acceptance is now ${acceptanceLine(acceptance)}`;
  return { decision: d, repeated, acceptance, line };
}
