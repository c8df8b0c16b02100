import { userInfo } from 'node:os';
import { BerthError } from '../../errors';
import { isFinalRunState, type Effect, type Json, type Run } from '../../model';
import { pruneSnapshots } from '../../snapshot';
import type { EffectWrite } from '../../store';
import { loadPlan, sandboxDocId, submitPlan, type PlanRunInput, type SandboxPointer, type StepResult } from '../../plan';
import { engineCapacity, snapshotEngine } from '../../sandbox';
import { checkEngineCapacity } from '../../../environment';
import { EGRESS_ENTRY, isNetworkAttempt, type EgressAttempt } from '../../egress';
import { createHostRuntime, type HostRuntime } from '../../runtime/host-runtime';
import { releaseEndedRunLeases } from '../../runtime/run-end-leases';
import { operatorReceipt, reconcileEffects, waitAfterReconcile } from '../../kernel';
import type { CliContext } from '../context';
import { duration, emit, escapeControl, LOG_COLUMN, outputLines, table } from '../output';
import { getRunOrThrow } from './runs';
import { readHost } from './run-driver';
import { EXIT, whileHoldingRight } from '../host-right';
import { runExit } from '../output';
import { progressPrinter } from './progress';
import { checkImageOnEngine, checkPlanSecrets } from './preflight';
import { followRun, startAgentHost } from './agent-host';
import { finishAgentRun } from './agent-run';
import type { Environment } from '../../../environment';

const operator = () => `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;

/** The host for one CLI invocation: sweeps leftovers, resumes every unfinished task, stops cleanly on Ctrl-C. */
async function startHost(ctx: CliContext, total: () => number): Promise<HostRuntime> {
  const rt = createHostRuntime({
    store: ctx.store,
    sandbox: ctx.sandbox,
    engine: snapshotEngine(ctx.docker),
    clock: ctx.clock,
    logger: ctx.logger,
    hostId: ctx.hostId,
    onProgress: progressPrinter(ctx.json, total),
  });
  const swept = [...(await ctx.sandbox.sweep()), ...(await releaseEndedRunLeases(ctx))];
  if (swept.length && !ctx.json) process.stderr.write(`  swept ${swept.length} leftover container(s)\n`);
  await rt.kernel.start();
  return rt;
}

/** Drives the run until it settles, or until Ctrl-C (then it stops without deciding anything: `berth resume` continues). */
async function drive(ctx: CliContext, rt: HostRuntime, runId: string): Promise<number> {
  const stop = new AbortController();
  const onSignal = () => stop.abort(new BerthError('interrupted', 'stopped by signal'));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let run: Run;
  try {
    run = await whileHoldingRight(rt.kernel, runId, rt.kernel.waitForRun(runId, { signal: stop.signal, states: ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'] }));
  } catch (err) {
    const bySignal = stop.signal.aborted;
    stop.abort(); // also ends waitForRun's polling when the right was lost
    await rt.kernel.stop();
    await rt.leasesReleased();
    if (bySignal) {
      process.stderr.write(`\nstopped; the run keeps its sandbox. Continue with: berth resume ${runId}\n`);
      return EXIT.signal;
    }
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  await rt.kernel.stop();
  await rt.leasesReleased();
  if (isFinalRunState(run.state)) {
    // Every sandbox leased for the run goes, also one a killed earlier host leased and never recorded.
    await releaseEndedRunLeases(ctx, [run.id]);
    await prune(ctx, run);
  }
  const reason = await summary(ctx, run);
  return runExit(run, reason);
}

/** Retention at the end of a run: the environment's `snapshot.keepLast` per session. */
async function prune(ctx: CliContext, run: Run): Promise<void> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  const keepLast = (root?.input as unknown as PlanRunInput | undefined)?.environment.snapshot.keepLast;
  if (keepLast === undefined) return;
  const engine = snapshotEngine(ctx.docker);
  await pruneSnapshots({ store: ctx.store, removeSnapshot: engine.removeSnapshot, clock: ctx.clock, logger: ctx.logger }, { keepLast, sessionId: run.sessionId });
}

async function summary(ctx: CliContext, run: Run): Promise<string> {
  const tasks = await ctx.store.listTasks({ runId: run.id });
  // A step caught in flight stays `interrupted` in its task; when the operator vouched for its
  // effect (--accept), the table says so rather than leaving it looking unresolved.
  const acceptedBy = new Map<string, string>();
  for (const e of await ctx.store.listEffects({ runId: run.id })) {
    const receipt = e.receipt as { decision?: string; by?: string } | null;
    const step = (e.intent as { step?: string } | null)?.step;
    if (e.status === 'confirmed' && receipt?.decision === 'accept' && step) acceptedBy.set(step, receipt.by ?? 'operator');
  }
  const root = tasks.find((t) => t.id === run.rootTaskId);
  const names = ((root?.input as unknown as PlanRunInput | undefined)?.plan?.steps ?? []).map((s) => s.name);
  // A step stopped by cancel has no command result; its name comes from the plan, its outcome says cancelled.
  const steps = tasks.filter((t) => t.kind === 'plan-step').map((t) => {
    const r = (t.result ?? t.error?.details ?? {}) as Partial<StepResult>;
    const by = t.outcome === 'interrupted' && r.step ? acceptedBy.get(r.step) : undefined;
    return { step: names[(t.input as { index?: number }).index ?? -1], outcome: t.outcome, status: t.status, code: t.error?.code, ...r, ...(by ? { acceptedBy: by } : {}) };
  });
  const transitions = await ctx.store.listRunTransitions(run.id);
  const reason = transitions.at(-1)?.reason ?? '';
  emit(ctx.json, { run, reason, steps }, () =>
    [
      '',
      table([['STEP', 'RESULT', 'EXIT', 'TIME', 'SNAPSHOT'], ...steps.map((s) => [s.step ?? '?', s.acceptedBy ? `accepted by ${s.acceptedBy}` : s.rewind !== undefined ? `rewound to step ${s.rewind + 1}` : s.alreadyDone ? 'ran before' : s.code && s.code !== 'step_failed' ? s.code : (s.outcome ?? s.status), String(s.exitCode ?? '-'), s.durationMs === undefined ? '-' : duration(s.durationMs), s.snapshotId ?? '-'])]),
      '',
      `run ${run.id}: ${run.state}${reason ? ` (${reason})` : ''}`,
      run.state === 'needs_reconciliation' ? `decide with: berth reconcile ${run.id} [--accept | --reject-effect] [--restore SNAPSHOT] | --fail   (berth show ${run.id} lists snapshots)` : '',
    ].filter((l, i, a) => l !== '' || i !== a.length - 1).join('\n'),
  );
  return reason;
}

/** `berth run PLAN`. */
export async function runPlan(ctx: CliContext, file: string, requestId?: string): Promise<number> {
  const loaded = await loadPlan(file);
  // Before anything is submitted: the engine's own error for these would come at container create.
  checkEngineCapacity(loaded.environment, await engineCapacity(ctx.docker));
  // Everything checkable is checked before the run exists: a run is created only to be driven.
  await checkImageOnEngine(ctx.docker, loaded.environment as Environment & { image: { digest: string } }, loaded.environmentFile);
  await checkPlanSecrets(loaded);
  const rt = await startHost(ctx, () => loaded.plan.steps.length);
  const { run, created } = await submitPlan(rt, loaded, requestId);
  if (!ctx.json) process.stderr.write(`${created ? 'started' : 'already submitted as'} run ${run.id} (${loaded.plan.steps.length} steps, image ${loaded.environment.image.ref})\n`);
  return drive(ctx, rt, run.id);
}

async function stepCount(ctx: CliContext, run: Run): Promise<number> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  return (root?.input as unknown as PlanRunInput | undefined)?.plan?.steps.length ?? 0;
}

/** `berth resume RUN`. */
export async function resumeRun(ctx: CliContext, runId: string): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  if (run.kind === 'agent') {
    // An agent run continues with the same live view as berth agent: conversation and tool calls.
    if (!ctx.json) process.stderr.write(`resuming run ${runId} (${run.state})\n`);
    return finishAgentRun(ctx, await followRun(ctx, await startAgentHost(ctx), run));
  }
  const total = await stepCount(ctx, run);
  const rt = await startHost(ctx, () => total);
  if (!ctx.json) process.stderr.write(`resuming run ${runId} (${run.state})\n`);
  return drive(ctx, rt, runId);
}

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
    const rt = await startHost(ctx, () => 0);
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
  const total = await stepCount(ctx, run);
  const rt = await startHost(ctx, () => total);
  if (!choice.restore && run.kind === 'plan') await requireUsableSandbox(ctx, rt, run);
  const payload = { ...(answer ? { effects: answer } : {}), ...(choice.restore ? { snapshotId: choice.restore } : {}) };
  const said = answer ? `the uncertain effects ${answer === 'accepted' ? 'happened' : 'did not happen'}` : 'no uncertain effects';
  const reason = `operator: ${said}; ${choice.restore ? `continue from snapshot ${choice.restore}` : 'continue in the current sandbox'}`;
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

/** `berth cancel RUN`: commits the intent; the host driving the run (or the next `berth resume`) carries it out. */
export async function cancelRun(ctx: CliContext, runId: string): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const actor = operator();
  const from = run.state;
  const transitions =
    from === 'running' ? [{ runId, from, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    // Through cancelling: a sibling task may be mid-effect; the run ends once its root task settles.
    : from === 'waiting_for_input' || from === 'awaiting_approval' ? [{ runId, from, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : from === 'admitted' ? [{ runId, from, to: 'running' as const, actor, reason: 'cancel requested before start' }, { runId, from: 'running' as const, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : from === 'retry_wait' ? [{ runId, from, to: 'running' as const, actor, reason: 'cancel requested during a retry wait' }, { runId, from: 'running' as const, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : null;
  if (!transitions) throw new BerthError('run_not_cancellable', `run ${runId} is ${from}; only admitted, running, retrying or waiting runs can be cancelled`, { ids: { runId } });
  const r = await ctx.store.commit({ sessionId: run.sessionId, label: 'run.cancel', actor, runTransitions: transitions, cancelTasks: run.rootTaskId ? [run.rootTaskId] : [] });
  if (!r.ok) throw new BerthError('cancel_conflict', `run ${runId} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId } });
  // Cancelled at once (it was waiting): its sandboxes go now, as a completed run's do.
  await releaseEndedRunLeases(ctx, [runId]);
  const host = await readHost(ctx.store, ctx.clock.now(), ctx.hostId);
  emit(ctx.json, { runId, requested: true, owner: host }, () =>
    host?.live
      ? `cancel of run ${runId} committed; host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} drives it and stops it now`
      : `cancel of run ${runId} committed; no live host drives it: berth resume ${runId} finishes the cancellation`,
  );
  return 0;
}

/** `berth logs RUN`: what each step printed (tails kept with the step's result), and every egress attempt of the run. */
export async function logs(ctx: CliContext, runId: string): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const entries = await ctx.store.listEntries(run.sessionId, { runId });
  const steps = entries.filter((e) => e.kind === 'plan.step.output').map((e) => e.body as unknown as StepResult);
  const egress = entries.filter((e) => e.kind === EGRESS_ENTRY).map((e) => e.body as unknown as Omit<EgressAttempt, 'runId'>);
  const network = entries.filter((e) => e.kind === 'egress.open' || e.kind === 'egress.override').map((e) => ({ kind: e.kind, ...(e.body as object) }));
  // Berth's own lines start with `berth │`, command output with `  out │`/`  err │` (escaped): a step
  // that prints a line looking like an audit line still shows as output. --json keeps them apart by field.
  const own = (text: string) => LOG_COLUMN.berth + escapeControl(text);
  emit(ctx.json, { runId, steps, egress, network }, () =>
    [
      ...network.map((n) => own(n.kind === 'egress.open' ? 'network open: outside hosts reachable, not audited' : 'network: allow list accepted with allowOverride')),
      ...(steps.length === 0
        ? [own(`run ${runId} has no finished steps yet`)]
        : steps.flatMap((s) => [own(`step ${s.step}: exit ${s.exitCode}, ${duration(s.durationMs)}${s.diskExceeded ? ', disk_exceeded' : ''}${s.pidsLimited ? ', pids_exceeded' : ''}`), ...outputLines('stdout', s.stdoutTail), ...outputLines('stderr', s.stderrTail)])),
      ...egress.map((a) =>
        own(
          isNetworkAttempt(a)
            ? `egress ${new Date(a.at).toISOString()} ${a.decision} ${a.method} ${a.target} x${a.count ?? 1} (${a.reason})`
            : `egress ${new Date(a.at).toISOString()} ${a.decision} ${a.method} ${a.target} (${a.reason}; ${a.bytesOut} B out, ${a.bytesIn} B in)`,
        ),
      ),
    ].join('\n'),
  );
  return 0;
}
