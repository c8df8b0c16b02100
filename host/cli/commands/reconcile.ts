/**
 * `berth reconcile RUN`: the operator's answers for a run in `needs_reconciliation` (did the
 * uncertain effects happen, which sandbox state to continue from, or ask the service again).
 */
import { BerthError } from '../../errors';
import { deliverAsOperator, operatorReceipt, reconcileEffects, waitAfterReconcile } from '../../kernel';
import type { Effect, Json, Run } from '../../model';
import { sandboxDocId, type SandboxPointer } from '../../run-sandbox';
import type { HostRuntime } from '../../runtime/host-runtime';
import { releaseEndedRunLeases } from '../../runtime/run-end-leases';
import type { EffectWrite } from '../../store';
import type { CliContext } from '../context';
import { emit } from '../output';
import { getRunOrThrow } from './runs';
import { readHost } from './run-driver';
import { drive, operator, startHost, takeRun, stepCount } from './plan-run';

/** The operator's answers to `berth reconcile`: whether the uncertain effects happened, and which sandbox state to continue from. */
export interface ReconcileChoice {
  /** The uncertain effects happened. */
  accept: boolean;
  /** The uncertain effects did not happen (a `never` step is then run again). */
  'reject-effect'?: boolean;
  /** Continue from this snapshot instead of the current sandbox. */
  restore?: string;
  /** End the run as failed (after settling the uncertain effects as answered). */
  fail: boolean;
  /** Ask the service again about the uncertain effects (through the verifier of each effect's kind). */
  verify?: boolean;
}

const settle = (actor: string, at: number, effects: Effect[], answer: 'accepted' | 'rejected'): EffectWrite[] =>
  effects.map((e): EffectWrite => ({
    id: e.id,
    expectStatus: e.status,
    set:
      answer === 'accepted'
        ? { status: 'confirmed', receipt: operatorReceipt(actor, 'accept', at, 'outcome unknown; accepted as happened by the operator') }
        : { status: 'failed', receipt: operatorReceipt(actor, 'reject', at, 'outcome unknown; the operator says it did not happen'), error: { code: 'operator_rejected', message: `settled by ${actor}: did not happen` } },
  }));

/**
 * `berth reconcile RUN`, with the operator as the actor. Two separate questions: did the uncertain
 * effects happen (`--accept` / `--reject-effect`), and which sandbox state to continue from (the
 * current sandbox, or `--restore SNAPSHOT`); `--fail` ends the run instead of continuing. A choice
 * that cannot be carried out is refused before anything is committed, or (found while carrying it
 * out) sends the run back to `needs_reconciliation`: never into a state the advice cannot leave.
 */
export async function reconcileRun(ctx: CliContext, runId: string, choice: ReconcileChoice): Promise<number> {
  const reject = choice['reject-effect'] === true;
  if (choice.verify && (choice.accept || reject || choice.restore !== undefined || choice.fail)) {
    throw new BerthError('usage', '--verify asks the service and decides nothing itself: give it alone');
  }
  if (choice.accept && reject) throw new BerthError('usage', '--accept (the effect happened) and --reject-effect (it did not) exclude each other');
  if (!choice.verify && !choice.accept && !reject && choice.restore === undefined && !choice.fail) {
    throw new BerthError('usage', 'reconcile needs a decision: --accept or --reject-effect (did the uncertain effect happen), --restore SNAPSHOT (continue from a snapshot), --verify (ask the service again), or --fail');
  }
  if (choice.fail && choice.restore !== undefined) throw new BerthError('usage', '--fail ends the run; it takes no --restore');
  const run = await getRunOrThrow(ctx.store, runId);
  if (run.state !== 'needs_reconciliation') {
    throw new BerthError('run_not_reconcilable', `run ${runId} is ${run.state}, not needs_reconciliation`, { ids: { runId } });
  }
  const actor = operator();
  if (choice.verify) return verifyRun(ctx, run, actor);
  const uncertain = (await ctx.store.listEffects({ runId })).filter((e) => e.status === 'unknown' || e.status === 'executing');
  const answer = choice.accept ? 'accepted' : reject ? 'rejected' : undefined;
  if (uncertain.length && !answer) {
    throw new BerthError('effect_answer_needed', `run ${runId} has ${uncertain.length} effect(s) that may or may not have happened (${uncertain.map((e) => e.id).join(', ')}): add --accept if they did, --reject-effect if they did not`, { ids: { runId } });
  }
  const effects = answer ? settle(actor, ctx.clock.now(), uncertain, answer) : [];
  const waiting = (await ctx.store.listTasks({ runId, statuses: ['waiting'] })).find((t) => t.wait?.signal === 'reconcile');
  if (!waiting && !choice.fail && choice.restore === undefined && answer) return acceptSettledRun(ctx, run, actor, effects, answer);
  if (choice.fail || !waiting) {
    if (!choice.fail) throw new BerthError('run_not_reconcilable', `run ${runId} has no task waiting for an operator; --accept, --reject-effect or --fail apply`, { ids: { runId } });
    const r = await ctx.store.commit({
      sessionId: run.sessionId,
      label: 'reconcile.fail',
      actor,
      effects,
      runTransitions: [
        { runId, from: 'needs_reconciliation', to: 'reconciling', actor, reason: 'operator chose --fail' },
        { runId, from: 'reconciling', to: 'failed', actor, reason: 'failed by operator' },
      ],
      cancelTasks: run.rootTaskId ? [run.rootTaskId] : [],
    });
    if (!r.ok) throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId } });
    // A live owner carries the cancellation of its tasks out; otherwise this host does, as the owner.
    const owner = await readHost(ctx.store, ctx.clock.now(), ctx.hostId, run.sessionId);
    if (owner?.live) {
      emit(ctx.json, { run: await ctx.store.getRun(runId), owner }, () => `run ${runId}: failed by ${actor}; host ${owner.hostId}${owner.pid ? ` (pid ${owner.pid})` : ''} drives it and stops its tasks`);
      return 0;
    }
    const rt = await startHost(ctx, () => 0);
    await takeRun(ctx, rt, run);
    await waitTerminal(ctx, run.rootTaskId);
    await rt.kernel.stop();
    for (const lease of await ctx.store.listLeases({ sessionId: run.sessionId })) {
      if (lease.releasedAt === null) await ctx.store.releaseLease(lease.id, ctx.clock.now());
    }
    await ctx.sandbox.sweep();
    await releaseEndedRunLeases(ctx, [runId]);
    emit(ctx.json, { run: await ctx.store.getRun(runId) }, () => `run ${runId}: failed by ${actor}`);
    return 0;
  }
  if (choice.restore) {
    const snap = await ctx.store.getSnapshot(choice.restore);
    if (!snap || snap.sessionId !== run.sessionId) {
      throw new BerthError('snapshot_not_found', `snapshot ${choice.restore} does not belong to run ${runId}'s session (berth show ${runId} lists them)`, { ids: { runId, snapshotId: choice.restore } });
    }
  }
  const payload = { ...(answer ? { effects: answer } : {}), ...(choice.restore ? { snapshotId: choice.restore } : {}) };
  const said = answer ? `the uncertain effects ${answer === 'accepted' ? 'happened' : 'did not happen'}` : 'no uncertain effects';
  const reason = `operator: ${said}; ${choice.restore ? `continue from snapshot ${choice.restore}` : 'continue in the current sandbox'}`;
  // A live host owns the parked run (a worker keeps it while it waits): the decision is committed
  // for it, as an approval is, and that host carries it out; a choice it cannot carry out parks
  // the run again, naming why.
  const owner = await readHost(ctx.store, ctx.clock.now(), ctx.hostId, run.sessionId);
  if (owner?.live) {
    const ok = await deliverAsOperator({ store: ctx.store, logger: ctx.logger }, waiting.id, 'reconcile', payload as Json, { actor, effects, runTransitions: [{ runId, from: 'needs_reconciliation', to: 'reconciling', actor, reason }] });
    if (!ok) throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile; look again with berth show ${runId}`, { retryable: true, ids: { runId } });
    emit(ctx.json, { run: await ctx.store.getRun(runId), owner, reason }, () => `reconciling run ${runId}: ${reason}; host ${owner.hostId}${owner.pid ? ` (pid ${owner.pid})` : ''} drives it and carries this out`);
    return 0;
  }
  const total = await stepCount(ctx, run);
  const rt = await startHost(ctx, () => total);
  await takeRun(ctx, rt, run);
  if (!choice.restore && run.kind === 'plan') await requireUsableSandbox(ctx, rt, run);
  const ok = await rt.kernel.deliver(waiting.id, 'reconcile', payload as Json, { actor, effects, runTransitions: [{ runId, from: 'needs_reconciliation', to: 'reconciling', actor, reason }] });
  if (!ok) {
    await rt.kernel.stop();
    throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile; look again with berth show ${runId}`, { retryable: true, ids: { runId } });
  }
  if (!ctx.json) process.stderr.write(`reconciling run ${runId}: ${reason}\n`);
  return drive(ctx, rt, runId);
}

/** Keeping the current sandbox needs one that works: said before anything is committed, with what can be restored instead. */
async function requireUsableSandbox(ctx: CliContext, rt: HostRuntime, run: Run): Promise<void> {
  const doc = await ctx.store.getDocument(sandboxDocId(run.id));
  const ptr = (doc ? rt.documents.rebuild(doc) : { leaseId: null, snapshotId: null, workspaceDigest: null }) as unknown as SandboxPointer;
  const usable = await rt.planSandbox.usable(ptr);
  if (usable.ok) return;
  await rt.kernel.stop();
  const snaps = await rt.planSandbox.restorable(run.id);
  const list = snaps.length ? snaps.map((s) => `${s.id} (${s.checkpoint})`).join(', ') : 'none';
  throw new BerthError('sandbox_unusable', `run ${run.id} cannot continue in its current sandbox: ${usable.reason}. Add --restore SNAPSHOT (restorable: ${list}); nothing was changed`, { ids: { runId: run.id } });
}

/**
 * `--verify`: asks the service again, through the verifier registered for each uncertain effect's
 * kind, and settles each with the real receipt (or as not applied); nothing is sent again. When
 * every effect is settled the run continues (a task waiting for the reconciliation) or ends as
 * its root task did; otherwise it stays in needs_reconciliation, naming what is still open.
 */
async function verifyRun(ctx: CliContext, run: Run, actor: string): Promise<number> {
  const total = await stepCount(ctx, run);
  const rt = await startHost(ctx, () => total);
  await takeRun(ctx, rt, run);
  let r;
  try {
    r = await reconcileEffects({ store: ctx.store, kernel: rt.kernel, registry: rt.registry, clock: ctx.clock }, run.id, { action: 'verify', actor });
  } catch (err) {
    await rt.kernel.stop();
    throw err;
  }
  if (!ctx.json) {
    for (const s of r.settled) process.stderr.write(`  ${s.effectId}: ${s.status} (${s.how})\n`);
    for (const o of r.open) process.stderr.write(`  ${o.effectId}: still uncertain: ${o.reason}\n`);
  }
  if (r.resumed && (await ctx.store.getRun(run.id))?.state === 'reconciling') return drive(ctx, rt, run.id);
  await rt.kernel.stop();
  const after = r.resumed ? await waitAfterReconcile({ store: ctx.store, kernel: rt.kernel }, run.id) : (await ctx.store.getRun(run.id))!;
  emit(ctx.json, { run: after, settled: r.settled, open: r.open }, () => `run ${run.id}: ${after.state}${r.open.length ? `; ${r.open.length} effect(s) still uncertain (berth reconcile ${run.id} --verify again, or --accept | --fail)` : ''}`);
  return after.state === 'completed' || after.state === 'cancelled' ? 0 : after.state === 'needs_reconciliation' ? 3 : 1;
}

/**
 * `--accept` / `--reject-effect` for a run whose root task has already ended (an agent run that
 * told the model about an uncertain call and finished): the operator says whether the uncertain
 * effects happened; the run ends as its root did.
 */
async function acceptSettledRun(ctx: CliContext, run: Run, actor: string, effects: EffectWrite[], answer: 'accepted' | 'rejected'): Promise<number> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  if (!root || root.status !== 'terminal') {
    throw new BerthError('run_not_reconcilable', `run ${run.id} has no task waiting for an operator and its root task has not ended; only --fail applies`, { ids: { runId: run.id } });
  }
  const to = root.outcome === 'ok' ? 'completed' : root.outcome === 'cancelled' ? 'cancelled' : 'failed';
  const r = await ctx.store.commit({
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
  await releaseEndedRunLeases(ctx, [run.id]);
  emit(ctx.json, { run: await ctx.store.getRun(run.id), [answer]: effects.map((e) => e.id) }, () => `run ${run.id}: ${to}; ${effects.length} uncertain effect(s) ${answer} by ${actor}`);
  return 0;
}

async function waitTerminal(ctx: CliContext, taskId: string | null): Promise<void> {
  if (!taskId) return;
  for (let i = 0; i < 600; i++) {
    if ((await ctx.store.getTask(taskId))?.status === 'terminal') return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

