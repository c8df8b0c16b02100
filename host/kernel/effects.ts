import type { Logger } from 'pino';
import { BerthError } from '../errors';
import type { Effect, Json } from '../model';
import type { CommitInput, CommitResult, EffectWrite, Store } from '../store';
import { ActionError, deliveryOf, withDelivery, type Delivery } from './delivery';
import type { PerformOutcome, PerformSpec } from './handler';

export interface PerformDeps {
  store: Store;
  commit: (input: CommitInput) => Promise<CommitResult>;
  sessionId: string;
  runId: string | null;
  taskId: string;
  taskKind: string;
  taskVersion: number;
  signal: AbortSignal;
  log: Logger;
  /** Effect updates that must commit together with the phase's decision. */
  pending: EffectWrite[];
  /** Whether a retryable error thrown now is retried by the phase runner (attempt budget left). */
  retriesLeft: boolean;
}

/**
 * The effect protocol for one action. The `executing` mark is committed before the action runs,
 * so recovery can tell "never started" (intended) from "may have happened" (executing). Effect ids
 * are store-wide logical keys: a confirmed effect gives its receipt to whoever performs it again,
 * one that definitely did not happen (`failed`, `compensated`) is attempted afresh by the new
 * caller, and one whose outcome is uncertain is verified (or reconciled) before anything else.
 *
 * An action that throws is classified ({@link deliveryOf}): `not_sent` and `rejected` are not
 * applied (retried with backoff while the budget lasts, then `failed`); anything else may have
 * been received: it is verified or repeated only when its replay policy allows, else it becomes
 * `unknown` and the phase is told it is uncertain. A bare error is never proof of non-delivery.
 */
export async function performEffect<R extends Json>(
  d: PerformDeps,
  spec: PerformSpec<R>,
  action: (signal: AbortSignal) => Promise<R>,
): Promise<PerformOutcome<R>> {
  const ids = { effectId: spec.id, taskId: d.taskId, runId: d.runId ?? undefined };
  const effect = await d.store.getEffect(spec.id);
  if (effect?.status === 'confirmed') return { status: 'done', receipt: effect.receipt as R, reused: true };
  // What a status query proved of the attempt a dead host left in flight, committed with the new one's start.
  let absent: EffectWrite | undefined;
  if (effect && (effect.status === 'executing' || effect.status === 'unknown')) {
    const uncertain = await whenInFlight(d, spec, effect);
    if (uncertain && uncertain !== 'absent') return uncertain;
    if (uncertain === 'absent') {
      absent = { id: spec.id, expectStatus: effect.status, set: { status: 'intended', error: { code: 'not_found', message: `${spec.kind} ${spec.id}: the service has no record of the earlier attempt`, delivery: 'not_sent' } }, settle: { by: 'status_query' } };
    }
  }
  // Cancelled (or stopping) before the action began: nothing was sent, nothing is marked.
  if (d.signal.aborted) throw new BerthError('action_not_started', `effect ${spec.id} not started: ${String((d.signal.reason as Error)?.message ?? d.signal.reason)}`, { ids });
  const fresh = effect !== undefined && (effect.status === 'failed' || effect.status === 'compensated');
  // An attempt of a logical effect another run left (not applied, or found not applied by its
  // lookup) becomes this run's and task's: its uncertainty, if any, is now theirs to reconcile.
  const adopt = effect !== undefined && (effect.runId !== d.runId || (fresh && effect.taskId !== d.taskId));
  // A failed attempt's error stays (the effect's and its attempt's): it is why this attempt may run.
  const begin: EffectWrite = {
    id: spec.id,
    ...(effect ? { expectStatus: absent ? 'intended' : effect.status } : { create: { runId: d.runId, taskId: d.taskId, kind: spec.kind, intent: spec.intent, replay: spec.replay } }),
    set: { status: 'executing', attempts: (effect?.attempts ?? 0) + 1, ...(adopt ? { owner: { runId: d.runId, taskId: d.taskId } } : {}) },
  };
  const began = await d.commit({
    sessionId: d.sessionId,
    label: `effect.begin:${d.taskKind}`,
    expectTasks: [{ taskId: d.taskId, version: d.taskVersion }],
    effects: absent ? [absent, begin] : [begin],
  });
  if (!began.ok) {
    throw new BerthError('ownership_lost', `effect ${spec.id} not started: ${began.conflict.kind}`, { ids, retryable: false, details: began.conflict });
  }
  let receipt: R;
  try {
    receipt = await action(d.signal);
  } catch (err) {
    return afterThrow(d, spec, err);
  }
  d.pending.push({ id: spec.id, expectStatus: 'executing', set: { status: 'confirmed', receipt } });
  return { status: 'done', receipt, reused: false };
}

/** Records what an action that threw proves, then retries, reports it uncertain, or fails the phase. */
async function afterThrow<R extends Json>(d: PerformDeps, spec: PerformSpec<R>, err: unknown): Promise<PerformOutcome<R>> {
  // Cancelled or stopping mid-action: whatever was written may have arrived, unless the action
  // itself says it provably sent nothing (an ActionError, or a BerthError carrying its delivery:
  // the command that was never started). A fetch's classified error is no such proof under abort.
  const delivery: Delivery = d.signal.aborted ? (statedNotSent(err) ? 'not_sent' : 'unknown') : deliveryOf(err);
  const error = errorJson(err, delivery);
  if (delivery !== 'unknown') {
    // A refused connection proven by a fetch error's causes may well be accepted later.
    const retryable = err instanceof BerthError ? err.retryable : delivery === 'not_sent';
    // Never retried once cancelled or stopping: the attempt is settled, the phase ends.
    const retry = retryable && d.retriesLeft && !d.signal.aborted;
    // Not applied: back to `intended` while a retry is scheduled, `failed` once none is left.
    d.pending.push({ id: spec.id, expectStatus: 'executing', set: { status: retry ? 'intended' : 'failed', error } });
    if (retry) throw retryWait(err, `${spec.kind} ${spec.id} not applied (${delivery}): ${error.message}`);
    throw err instanceof BerthError ? err : withDelivery(err, delivery, false);
  }
  if (d.signal.aborted) {
    d.pending.push({ id: spec.id, expectStatus: 'executing', set: { status: 'unknown', error } });
    throw err;
  }
  // An engine that went away mid-action (a retryable BerthError of the action's own): the effect
  // stays `executing` and the retry treats it as in flight, as a new host would.
  if (err instanceof BerthError && !(err instanceof ActionError) && err.retryable && d.retriesLeft) throw err;
  const canRecheck = spec.replay === 'safe' || (spec.replay === 'verify' && spec.verify !== undefined);
  if (canRecheck && d.retriesLeft) {
    // Left `executing`: the retry (after a backoff in retry_wait) verifies it, or repeats a safe one.
    throw retryWait(err, `${spec.kind} ${spec.id} may have been received (${error.message}); checking again`);
  }
  d.pending.push({ id: spec.id, expectStatus: 'executing', set: { status: 'unknown', error } });
  return { status: 'uncertain', effect: { ...(await d.store.getEffect(spec.id))!, status: 'unknown' }, reason: `${spec.kind} ${spec.id} may or may not have happened: ${error.message}` };
}

/** Whether the error itself states that nothing was sent (not what a fetch error's causes suggest). */
function statedNotSent(err: unknown): boolean {
  return err instanceof BerthError && (err instanceof ActionError ? err.delivery : err.details?.delivery) === 'not_sent';
}

/** A retryable error the phase runner waits out in `retry_wait`, naming the reason. */
function retryWait(cause: unknown, message: string): BerthError {
  return new BerthError('action_retry', message, { retryable: true, details: { retryWait: true }, cause });
}

/**
 * Decides what to do with an effect a dead host left in flight; returns an outcome, or null to run
 * it again (a safe one), or `absent` to run it again because its status query found no trace of it.
 */
async function whenInFlight<R extends Json>(d: PerformDeps, spec: PerformSpec<R>, effect: Effect): Promise<PerformOutcome<R> | null | 'absent'> {
  // The policy recorded at intent time binds: a tool made "safer" since then does not license a replay.
  const policy = effect.replay === 'safe' && spec.replay === 'safe' ? 'safe' : effect.replay === 'never' || spec.replay === 'never' ? 'never' : 'verify';
  if (policy === 'safe') return null;
  if (policy === 'verify' && spec.verify) {
    let v: Awaited<ReturnType<NonNullable<PerformSpec<R>['verify']>>>;
    try {
      v = await spec.verify(effect, d.signal);
    } catch (err) {
      if (d.signal.aborted) throw err;
      // The service cannot say: wait and ask again while the budget lasts, then leave it to reconciliation.
      const message = err instanceof Error ? `${err.message}${causeText(err)}` : String(err);
      if (d.retriesLeft) throw retryWait(err, `cannot verify ${spec.kind} ${spec.id} (${message}); asking again`);
      d.pending.push({ id: spec.id, expectStatus: effect.status, set: { status: 'unknown', error: { code: 'verification_unavailable', message }, ...adoptedBy(d, effect) } });
      return { status: 'uncertain', effect, reason: `effect ${spec.id} (${spec.kind}) may have happened and its verification failed: ${message}` };
    }
    if (!v.done) return 'absent';
    d.pending.push({ id: spec.id, set: { status: 'confirmed', receipt: v.receipt }, settle: { by: 'status_query' } });
    d.log.info({ effectId: spec.id }, 'effect confirmed by verification');
    return { status: 'done', receipt: v.receipt, reused: true };
  }
  if (effect.status !== 'unknown' || effect.runId !== d.runId) d.pending.push({ id: spec.id, expectStatus: effect.status, set: { status: 'unknown', ...adoptedBy(d, effect) } });
  return {
    status: 'uncertain',
    effect,
    reason: `effect ${spec.id} (${spec.kind}, replay ${effect.replay}) was in flight when the host stopped; it may or may not have happened`,
  };
}

/**
 * A later submission that meets another run's uncertain effect reconciles it first: the effect
 * moves to this run (and task), so this run cannot end until it is settled and its reconcile finds it.
 */
function adoptedBy(d: PerformDeps, effect: Effect): { owner?: { runId: string | null; taskId: string } } {
  return effect.runId !== d.runId ? { owner: { runId: d.runId, taskId: d.taskId } } : {};
}

function errorJson(err: unknown, delivery: Delivery): { code: string; message: string; delivery: Delivery } {
  if (err instanceof BerthError) return { code: err.code, message: err.message, delivery };
  return { code: 'action_failed', message: err instanceof Error ? `${err.message}${causeText(err)}` : String(err), delivery };
}

const causeText = (err: Error) => (err.cause instanceof Error ? ` (${(err.cause as { code?: string }).code ?? err.cause.message})` : '');
