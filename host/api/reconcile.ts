import { BerthError } from '../errors';
import { deliverAsOperator, operatorReceipt, reconcileEffects, waitAfterReconcile } from '../kernel';
import type { Effect, Json, Run } from '../model';
import { sandboxDocId, type SandboxPointer } from '../run-sandbox';
import type { HostRuntime } from '../runtime/host-runtime';
import { releaseEndedRunLeases } from '../runtime/run-end-leases';
import type { EffectWrite } from '../store';
import { getRunOrThrow, ownerOf } from './decisions';
import { tasksSettled } from './tasks-settled';
import { assertKindsKnown, startHost, takeRun } from './drive';
import type { HostView } from './run-driver';
import { hostRuntime, type RuntimeOptions, type RuntimeParts } from './runtime';

/** The operator's answers: whether the uncertain effects happened, and which sandbox state to continue from. */
export interface ReconcileChoice {
  /** The uncertain effects happened. */
  accept?: boolean;
  /** The uncertain effects did not happen (a `never` step is then run again). */
  rejectEffect?: boolean;
  /** Continue from this snapshot instead of the current sandbox. */
  restore?: string;
  /** End the run as failed (after settling the uncertain effects as answered). */
  fail?: boolean;
  /** Ask the service again about the uncertain effects (through the verifier of each effect's kind). */
  verify?: boolean;
}

/**
 * What a reconcile did. `drive`: this host now owns the run and has delivered the decision; the
 * caller drives `rt` on (see `drive`). The others are settled here.
 */
export type Reconciled =
  | { kind: 'drive'; rt: HostRuntime; reason: string; verified?: Verified }
  | { kind: 'delivered'; run: Run; owner: HostView; reason: string }
  | { kind: 'failed'; run: Run; owner: HostView | null; leftUncertain: string[] }
  | { kind: 'settled'; run: Run; to: Run['state']; answer: 'accepted' | 'rejected'; effectIds: string[] }
  | { kind: 'verified'; run: Run; verified: Verified };

export type Verified = Awaited<ReturnType<typeof reconcileEffects>>;

const settle = (actor: string, at: number, effects: Effect[], answer: 'accepted' | 'rejected'): EffectWrite[] =>
  effects.map((e): EffectWrite => ({
    id: e.id,
    expectStatus: e.status,
    set:
      answer === 'accepted'
        ? { status: 'confirmed', receipt: operatorReceipt(actor, 'accept', at, 'outcome unknown; accepted as happened by the operator') }
        : { status: 'failed', receipt: operatorReceipt(actor, 'reject', at, 'outcome unknown; the operator says it did not happen'), error: { code: 'operator_rejected', message: `settled by ${actor}: did not happen` } },
  }));

/** A choice that cannot mean anything is refused before anything is read. */
export function checkChoice(c: ReconcileChoice): void {
  const reject = c.rejectEffect === true;
  if (c.verify && (c.accept || reject || c.restore !== undefined || c.fail)) throw new BerthError('usage', '--verify asks the service and decides nothing itself: give it alone');
  if (c.accept && reject) throw new BerthError('usage', '--accept (the effect happened) and --reject-effect (it did not) exclude each other');
  if (!c.verify && !c.accept && !reject && c.restore === undefined && !c.fail) {
    throw new BerthError('usage', 'reconcile needs a decision: --accept or --reject-effect (did the uncertain effect happen), --restore SNAPSHOT (continue from a snapshot), --verify (ask the service again), or --fail');
  }
  if (c.fail && c.restore !== undefined) throw new BerthError('usage', '--fail ends the run; it takes no --restore');
}

/**
 * Decides a run in `needs_reconciliation` as `actor`. Two separate questions: did the uncertain
 * effects happen (`accept` / `rejectEffect`), and which sandbox state to continue from (the current
 * one, or `restore`); `fail` ends the run instead. A choice that cannot be carried out is refused
 * before anything is committed. A live owner (a worker keeps a parked run) gets the decision
 * committed for it and carries it out; otherwise this host takes the run and continues it.
 */
export async function reconcile(p: RuntimeParts, runId: string, choice: ReconcileChoice, actor: string, host: Omit<RuntimeOptions, 'claim'> = {}): Promise<Reconciled> {
  checkChoice(choice);
  const run = await getRunOrThrow(p.store, runId);
  if (run.state !== 'needs_reconciliation') throw new BerthError('run_not_reconcilable', `run ${runId} is ${run.state}, not needs_reconciliation`, { ids: { runId } });
  // Every decision below that no live owner carries out is carried out here: said now, before
  // anything is committed, when this host cannot run the run's unfinished tasks.
  const local = hostRuntime(p, { claim: 'none' });
  if (!(await ownerOf(p, run))?.live) await assertKindsKnown(p, local, run);
  const uncertain = (await p.store.listEffects({ runId })).filter((e) => e.status === 'unknown' || e.status === 'executing');
  if (choice.verify) {
    assertVerifiable(run, uncertain, (kind) => local.registry.verifier(kind) !== undefined);
    return verify(p, run, actor, host);
  }
  const reject = choice.rejectEffect === true;
  const answer = choice.accept ? 'accepted' : reject ? 'rejected' : undefined;
  // Continuing needs the answer (a never step runs again only if it did not happen); ending the
  // run does not: an operator who cannot know fails it, and the effects stay uncertain on record.
  if (uncertain.length && !answer && !choice.fail) {
    const effectIds = uncertain.map((e) => e.id);
    throw new BerthError('effect_answer_needed', `run ${runId} has ${uncertain.length} effect(s) that may or may not have happened (${effectIds.join(', ')}): add --accept if they did, --reject-effect if they did not, or --fail to end the run leaving them uncertain`, { ids: { runId }, details: { effectIds, fail: false } });
  }
  const effects = answer ? settle(actor, p.clock.now(), uncertain, answer) : [];
  const waiting = (await p.store.listTasks({ runId, statuses: ['waiting'] })).find((t) => t.wait?.signal === 'reconcile');
  if (!waiting && !choice.fail && choice.restore === undefined && answer) return settleEndedRun(p, run, actor, effects, answer);
  if (choice.fail || !waiting) {
    if (!choice.fail) throw new BerthError('run_not_reconcilable', `run ${runId} has no task waiting for an operator; --accept, --reject-effect or --fail apply`, { ids: { runId }, details: { noWaiting: true } });
    return failRun(p, run, actor, effects, answer ? [] : uncertain.map((e) => e.id));
  }
  if (choice.restore) {
    const snap = await p.store.getSnapshot(choice.restore);
    if (!snap || snap.sessionId !== run.sessionId) throw new BerthError('snapshot_not_found', `snapshot ${choice.restore} does not belong to run ${runId}'s session (berth show ${runId} lists them)`, { ids: { runId, snapshotId: choice.restore } });
  }
  const payload = { ...(answer ? { effects: answer } : {}), ...(choice.restore ? { snapshotId: choice.restore } : {}) };
  const said = answer ? `the uncertain effects ${answer === 'accepted' ? 'happened' : 'did not happen'}` : 'no uncertain effects';
  const reason = `operator: ${said}; ${choice.restore ? `continue from snapshot ${choice.restore}` : 'continue in the current sandbox'}`;
  const runTransitions = [{ runId, from: 'needs_reconciliation' as const, to: 'reconciling' as const, actor, reason }];
  // A live host owns the parked run (a worker keeps it while it waits): the decision is committed
  // for it, as an approval is, and that host carries it out; one it cannot carry out parks the run again.
  const owner = await ownerOf(p, run);
  if (owner?.live) {
    const ok = await deliverAsOperator({ store: p.store, logger: p.logger }, waiting.id, 'reconcile', payload as Json, { actor, effects, runTransitions });
    if (!ok) throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile; look again with berth show ${runId}`, { retryable: true, ids: { runId } });
    return { kind: 'delivered', run: (await p.store.getRun(runId))!, owner, reason };
  }
  const { rt } = await startHost(p, host);
  await takeRun(p, rt, run, { actor });
  if (!choice.restore && run.kind === 'plan') await requireUsableSandbox(p, rt, run);
  const ok = await rt.kernel.deliver(waiting.id, 'reconcile', payload as Json, { actor, effects, runTransitions });
  if (!ok) {
    await rt.kernel.stop();
    throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile; look again with berth show ${runId}`, { retryable: true, ids: { runId } });
  }
  return { kind: 'drive', rt, reason };
}

/**
 * `--verify` asks through the verifier of each uncertain effect's kind: with nothing uncertain, or
 * no verifier in this host for any of them, it could only come back with nothing done, so it is
 * refused before the run is taken, naming what would work instead.
 */
function assertVerifiable(run: Run, uncertain: Effect[], known: (kind: string) => boolean): void {
  if (!uncertain.length) throw new BerthError('nothing_to_verify', `run ${run.id} has no uncertain effect to ask about; --accept continues it, --fail ends it`, { ids: { runId: run.id } });
  if (uncertain.some((e) => known(e.kind))) return;
  const kinds = [...new Set(uncertain.map((e) => e.kind))];
  throw new BerthError(
    'no_verifier',
    `run ${run.id}: this host has no verifier for effect kind ${kinds.join(', ')} (${uncertain.map((e) => e.id).join(', ')}); nothing was changed. ` +
      'Load the extension that registers it (berth --extension MODULE reconcile RUN --verify), or say whether it happened with --accept or --reject-effect',
    { ids: { runId: run.id }, details: { kinds, effectIds: uncertain.map((e) => e.id) } },
  );
}

/**
 * `fail`: the run ends failed; a live owner stops its tasks, otherwise this host does as the owner.
 * `leftUncertain`: effects failed without an answer, kept `unknown` (nobody knows whether they
 * happened, and a failed run never runs them again); the final transition names them.
 */
async function failRun(p: RuntimeParts, run: Run, actor: string, effects: EffectWrite[], leftUncertain: string[]): Promise<Reconciled> {
  const runId = run.id;
  const left = leftUncertain.length ? `; left uncertain: ${leftUncertain.join(', ')} (may or may not have happened; never run again)` : '';
  const r = await p.store.commit({
    sessionId: run.sessionId,
    label: 'reconcile.fail',
    actor,
    effects,
    runTransitions: [
      { runId, from: 'needs_reconciliation', to: 'reconciling', actor, reason: 'operator chose --fail' },
      { runId, from: 'reconciling', to: 'failed', actor, reason: `failed by operator${left}`, leaveUncertain: leftUncertain },
    ],
    cancelTasks: run.rootTaskId ? [run.rootTaskId] : [],
  });
  if (!r.ok) throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId } });
  const owner = await ownerOf(p, run);
  if (owner?.live) return { kind: 'failed', run: (await p.store.getRun(runId))!, owner, leftUncertain };
  const { rt } = await startHost(p);
  await takeRun(p, rt, run, { actor });
  await tasksSettled(p.store, rt.kernel, runId);
  await rt.kernel.stop();
  for (const lease of await p.store.listLeases({ sessionId: run.sessionId })) {
    if (lease.releasedAt === null) await p.store.releaseLease(lease.id, p.clock.now());
  }
  await p.sandbox.sweep();
  await releaseEndedRunLeases(p, [runId]);
  return { kind: 'failed', run: (await p.store.getRun(runId))!, owner: null, leftUncertain };
}

/** Keeping the current sandbox needs one that works: said before anything is committed, with what can be restored instead. */
async function requireUsableSandbox(p: RuntimeParts, rt: HostRuntime, run: Run): Promise<void> {
  const doc = await p.store.getDocument(sandboxDocId(run.id));
  const ptr = (doc ? rt.documents.rebuild(doc) : { leaseId: null, snapshotId: null, workspaceDigest: null }) as unknown as SandboxPointer;
  const usable = await rt.planSandbox.usable(ptr);
  if (usable.ok) return;
  await rt.kernel.stop();
  const snaps = await rt.planSandbox.restorable(run.id);
  const list = snaps.length ? snaps.map((s) => `${s.id} (${s.checkpoint})`).join(', ') : 'none';
  throw new BerthError('sandbox_unusable', `run ${run.id} cannot continue in its current sandbox: ${usable.reason}. Add --restore SNAPSHOT (restorable: ${list}); nothing was changed`, { ids: { runId: run.id }, details: { reason: usable.reason, restorable: snaps.map((s) => s.id) } });
}

/**
 * `verify`: asks the service again, through the verifier registered for each uncertain effect's
 * kind, and settles each with the real receipt (or as not applied); nothing is sent again. When
 * every effect is settled the run continues or ends as its root task did; otherwise it stays in
 * needs_reconciliation, naming what is still open.
 */
async function verify(p: RuntimeParts, run: Run, actor: string, host: Omit<RuntimeOptions, 'claim'>): Promise<Reconciled> {
  const { rt } = await startHost(p, host);
  await takeRun(p, rt, run, { actor });
  let verified: Verified;
  try {
    verified = await reconcileEffects({ store: p.store, kernel: rt.kernel, registry: rt.registry, clock: p.clock }, run.id, { action: 'verify', actor });
  } catch (err) {
    await rt.kernel.stop();
    throw err;
  }
  if (verified.resumed && (await p.store.getRun(run.id))?.state === 'reconciling') return { kind: 'drive', rt, reason: 'verified', verified };
  await rt.kernel.stop();
  const after = verified.resumed ? await waitAfterReconcile({ store: p.store, kernel: rt.kernel }, run.id) : (await p.store.getRun(run.id))!;
  return { kind: 'verified', run: after, verified };
}

/**
 * `accept` / `rejectEffect` for a run whose root task has already ended (an agent run that told
 * the model about an uncertain call and finished): the run ends as its root did.
 */
async function settleEndedRun(p: RuntimeParts, run: Run, actor: string, effects: EffectWrite[], answer: 'accepted' | 'rejected'): Promise<Reconciled> {
  const root = run.rootTaskId ? await p.store.getTask(run.rootTaskId) : undefined;
  if (!root || root.status !== 'terminal') throw new BerthError('run_not_reconcilable', `run ${run.id} has no task waiting for an operator and its root task has not ended; only --fail applies`, { ids: { runId: run.id }, details: { onlyFail: true } });
  const to = root.outcome === 'ok' ? 'completed' : root.outcome === 'cancelled' ? 'cancelled' : 'failed';
  const r = await p.store.commit({
    sessionId: run.sessionId,
    label: 'reconcile.accept',
    actor,
    effects,
    runTransitions: [
      { runId: run.id, from: 'needs_reconciliation', to: 'reconciling', actor, reason: `operator: ${effects.length} uncertain effect(s) ${answer === 'accepted' ? 'happened' : 'did not happen'}` },
      { runId: run.id, from: 'reconciling', to, actor, reason: `root task ended ${root.outcome}; ${answer} by operator` },
    ],
  });
  if (!r.ok) throw new BerthError('reconcile_conflict', `run ${run.id} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId: run.id } });
  await releaseEndedRunLeases(p, [run.id]);
  return { kind: 'settled', run: (await p.store.getRun(run.id))!, to, answer, effectIds: effects.map((e) => e.id) };
}
