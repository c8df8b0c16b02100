import type { Logger } from 'pino';
import { BerthError } from '../errors';
import type { Effect, Json } from '../model';
import type { CommitInput, CommitResult, EffectWrite, Store } from '../store';
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
}

/**
 * The effect protocol for one action. The `executing` mark is committed before the action runs,
 * so recovery can tell "never started" (intended) from "may have happened" (executing).
 */
export async function performEffect<R extends Json>(
  d: PerformDeps,
  spec: PerformSpec<R>,
  action: (signal: AbortSignal) => Promise<R>,
): Promise<PerformOutcome<R>> {
  const ids = { effectId: spec.id, taskId: d.taskId, runId: d.runId ?? undefined };
  const effect = await d.store.getEffect(spec.id);
  if (effect?.status === 'confirmed') return { status: 'done', receipt: effect.receipt as R, reused: true };
  if (effect?.status === 'failed' || effect?.status === 'compensated') {
    throw new BerthError('effect_settled', `effect ${spec.id} is already ${effect.status}`, { ids });
  }
  if (effect && (effect.status === 'executing' || effect.status === 'unknown')) {
    const uncertain = await whenInFlight(d, spec, effect);
    if (uncertain) return uncertain;
  }
  const begin: EffectWrite = {
    id: spec.id,
    ...(effect ? { expectStatus: effect.status } : { create: { runId: d.runId, taskId: d.taskId, kind: spec.kind, intent: spec.intent, replay: spec.replay } }),
    set: { status: 'executing', attempts: (effect?.attempts ?? 0) + 1 },
  };
  const began = await d.commit({
    sessionId: d.sessionId,
    label: `effect.begin:${d.taskKind}`,
    expectTasks: [{ taskId: d.taskId, version: d.taskVersion }],
    effects: [begin],
  });
  if (!began.ok) {
    throw new BerthError('ownership_lost', `effect ${spec.id} not started: ${began.conflict.kind}`, { ids, retryable: false, details: began.conflict });
  }
  let receipt: R;
  try {
    receipt = await action(d.signal);
  } catch (err) {
    // A retryable failure (the engine went away mid-action) says nothing about whether the action
    // happened: the effect stays `executing`, so the retry treats it as in flight.
    if (!(err instanceof BerthError && err.retryable)) {
      d.pending.push({ id: spec.id, expectStatus: 'executing', set: { status: 'failed', error: errorJson(err) } });
    }
    throw err;
  }
  d.pending.push({ id: spec.id, expectStatus: 'executing', set: { status: 'confirmed', receipt } });
  return { status: 'done', receipt, reused: false };
}

/** Decides what to do with an effect a dead host left in flight; returns an outcome, or null to run it again. */
async function whenInFlight<R extends Json>(d: PerformDeps, spec: PerformSpec<R>, effect: Effect): Promise<PerformOutcome<R> | null> {
  // The policy recorded at intent time binds: a tool made "safer" since then does not license a replay.
  const policy = effect.replay === 'safe' && spec.replay === 'safe' ? 'safe' : effect.replay === 'never' || spec.replay === 'never' ? 'never' : 'verify';
  if (policy === 'safe') return null;
  if (policy === 'verify' && spec.verify) {
    const v = await spec.verify(effect, d.signal);
    if (!v.done) return null;
    d.pending.push({ id: spec.id, set: { status: 'confirmed', receipt: v.receipt } });
    d.log.info({ effectId: spec.id }, 'effect confirmed by verification');
    return { status: 'done', receipt: v.receipt, reused: true };
  }
  if (effect.status !== 'unknown') d.pending.push({ id: spec.id, expectStatus: effect.status, set: { status: 'unknown' } });
  return {
    status: 'uncertain',
    effect,
    reason: `effect ${spec.id} (${spec.kind}, replay ${effect.replay}) was in flight when the host stopped; it may or may not have happened`,
  };
}

function errorJson(err: unknown): Json {
  if (err instanceof BerthError) return { code: err.code, message: err.message };
  return { code: 'action_failed', message: err instanceof Error ? err.message : String(err) };
}
