import { userInfo } from 'node:os';
import { BerthError } from '../../errors';
import { isFinalRunState, type Json, type Run } from '../../model';
import { pruneSnapshots } from '../../snapshot';
import type { EffectWrite } from '../../store';
import { loadPlan, submitPlan, type PlanRunInput, type StepResult } from '../../plan';
import { snapshotEngine } from '../../sandbox';
import { EGRESS_ENTRY, type EgressAttempt } from '../../egress';
import { createHostRuntime, type HostRuntime } from '../../runtime/host-runtime';
import { operatorReceipt, reconcileEffects, waitAfterReconcile } from '../../kernel';
import type { CliContext } from '../context';
import { duration, emit, table } from '../output';
import { getRunOrThrow } from './runs';
import { progressPrinter } from './progress';

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
  const swept = await ctx.sandbox.sweep();
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
    run = await rt.kernel.waitForRun(runId, { signal: stop.signal, states: ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'] });
  } catch (err) {
    await rt.kernel.stop();
    if (stop.signal.aborted) {
      process.stderr.write(`\nstopped; the run keeps its sandbox. Continue with: berth resume ${runId}\n`);
      return 130;
    }
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  await rt.kernel.stop();
  if (isFinalRunState(run.state)) await prune(ctx, run);
  await summary(ctx, run);
  return run.state === 'completed' ? 0 : run.state === 'needs_reconciliation' ? 3 : 1;
}

/** Retention at the end of a run: the environment's `snapshot.keepLast` per session. */
async function prune(ctx: CliContext, run: Run): Promise<void> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  const keepLast = (root?.input as unknown as PlanRunInput | undefined)?.environment.snapshot.keepLast;
  if (keepLast === undefined) return;
  const engine = snapshotEngine(ctx.docker);
  await pruneSnapshots({ store: ctx.store, removeSnapshot: engine.removeSnapshot, clock: ctx.clock, logger: ctx.logger }, { keepLast, sessionId: run.sessionId });
}

async function summary(ctx: CliContext, run: Run): Promise<void> {
  const tasks = await ctx.store.listTasks({ runId: run.id });
  const root = tasks.find((t) => t.id === run.rootTaskId);
  const names = ((root?.input as unknown as PlanRunInput | undefined)?.plan?.steps ?? []).map((s) => s.name);
  // A step stopped by cancel has no command result; its name comes from the plan, its outcome says cancelled.
  const steps = tasks.filter((t) => t.kind === 'plan-step').map((t) => ({ step: names[(t.input as { index?: number }).index ?? -1], outcome: t.outcome, status: t.status, ...((t.result ?? t.error?.details ?? {}) as Partial<StepResult>) }));
  const transitions = await ctx.store.listRunTransitions(run.id);
  const reason = transitions.at(-1)?.reason ?? '';
  emit(ctx.json, { run, reason, steps }, () =>
    [
      '',
      table([['STEP', 'RESULT', 'EXIT', 'TIME', 'SNAPSHOT'], ...steps.map((s) => [s.step ?? '?', s.outcome ?? s.status, String(s.exitCode ?? '-'), s.durationMs === undefined ? '-' : duration(s.durationMs), s.snapshotId ?? '-'])]),
      '',
      `run ${run.id}: ${run.state}${reason ? ` (${reason})` : ''}`,
      run.state === 'needs_reconciliation' ? `decide with: berth reconcile ${run.id} --restore SNAPSHOT | --accept | --fail   (berth show ${run.id} lists snapshots)` : '',
    ].filter((l, i, a) => l !== '' || i !== a.length - 1).join('\n'),
  );
}

/** `berth run PLAN`. */
export async function runPlan(ctx: CliContext, file: string, requestId?: string): Promise<number> {
  const loaded = await loadPlan(file);
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
  const total = await stepCount(ctx, run);
  const rt = await startHost(ctx, () => total);
  if (!ctx.json) process.stderr.write(`resuming run ${runId} (${run.state})\n`);
  return drive(ctx, rt, runId);
}

/** `berth reconcile RUN --verify | --restore SNAPSHOT | --accept | --fail`, with the operator as the actor. */
export async function reconcileRun(ctx: CliContext, runId: string, choice: { restore?: string; accept: boolean; fail: boolean; verify?: boolean }): Promise<number> {
  const picked = [choice.restore !== undefined, choice.accept, choice.fail, Boolean(choice.verify)].filter(Boolean).length;
  if (picked !== 1) throw new BerthError('usage', 'reconcile needs exactly one of --verify, --restore SNAPSHOT, --accept, --fail');
  const run = await getRunOrThrow(ctx.store, runId);
  if (run.state !== 'needs_reconciliation') {
    throw new BerthError('run_not_reconcilable', `run ${runId} is ${run.state}, not needs_reconciliation`, { ids: { runId } });
  }
  const actor = operator();
  if (choice.verify) return verifyRun(ctx, run, actor);
  const waiting = (await ctx.store.listTasks({ runId, statuses: ['waiting'] })).find((t) => t.wait?.signal === 'reconcile');
  if (!waiting && choice.accept) return acceptSettledRun(ctx, run, actor);
  if (choice.fail || !waiting) {
    if (!choice.fail) throw new BerthError('run_not_reconcilable', `run ${runId} has no task waiting for an operator; --accept or --fail apply`, { ids: { runId } });
    const r = await ctx.store.commit({
      sessionId: run.sessionId,
      label: 'reconcile.fail',
      actor,
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
  const payload: { action: string; snapshotId?: string } = choice.restore ? { action: 'restore', snapshotId: choice.restore } : { action: 'accept' };
  const reason = choice.restore ? `operator restores snapshot ${choice.restore}` : 'operator accepts the sandbox as it is';
  // The operator's decision settles every uncertain effect: accepted as happened, or undone by the restore.
  const uncertain = (await ctx.store.listEffects({ runId })).filter((e) => e.status === 'unknown' || e.status === 'executing');
  // Receipts typed as the operator's decision, so nothing reads them as a service's receipt.
  const at = ctx.clock.now();
  const effects = uncertain.map((e): EffectWrite => ({
    id: e.id,
    expectStatus: e.status,
    set: choice.restore
      ? { status: 'compensated', receipt: operatorReceipt(actor, 'restore', at, `undone by restoring snapshot ${choice.restore}`, choice.restore) }
      : { status: 'confirmed', receipt: operatorReceipt(actor, 'accept', at, 'outcome unknown; accepted as happened by the operator') },
  }));
  const ok = await rt.kernel.deliver(waiting.id, 'reconcile', payload as Json, { actor, effects, runTransitions: [{ runId, from: 'needs_reconciliation', to: 'reconciling', actor, reason }] });
  if (!ok) throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile; look again with berth show ${runId}`, { retryable: true, ids: { runId } });
  if (!ctx.json) process.stderr.write(`reconciling run ${runId}: ${reason}\n`);
  return drive(ctx, rt, runId);
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
 * `--accept` for a run whose root task has already ended (an agent run that told the model about
 * an uncertain call and finished, a cancelled run): the operator vouches that the uncertain
 * effects happened (receipts typed as the operator's decision); the run ends as its root did,
 * `cancelled` included.
 */
async function acceptSettledRun(ctx: CliContext, run: Run, actor: string): Promise<number> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  if (!root || root.status !== 'terminal') {
    throw new BerthError('run_not_reconcilable', `run ${run.id} has no task waiting for an operator and its root task has not ended; only --fail applies`, { ids: { runId: run.id } });
  }
  const rt = createHostRuntime({ store: ctx.store, sandbox: ctx.sandbox, engine: snapshotEngine(ctx.docker), clock: ctx.clock, logger: ctx.logger, hostId: ctx.hostId });
  const r = await reconcileEffects({ store: ctx.store, kernel: rt.kernel, registry: rt.registry, clock: ctx.clock }, run.id, { action: 'accept', actor });
  const after = (await ctx.store.getRun(run.id))!;
  emit(ctx.json, { run: after, accepted: r.settled.map((s) => s.effectId) }, () => `run ${run.id}: ${after.state}; ${r.settled.length} uncertain effect(s) accepted by ${actor}`);
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
    : from === 'waiting_for_input' || from === 'awaiting_approval' ? [{ runId, from, to: 'cancelled' as const, actor, reason: 'cancelled by operator' }]
    : from === 'admitted' ? [{ runId, from, to: 'running' as const, actor, reason: 'cancel requested before start' }, { runId, from: 'running' as const, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : from === 'retry_wait' ? [{ runId, from, to: 'running' as const, actor, reason: 'cancel requested during a retry wait' }, { runId, from: 'running' as const, to: 'cancelling' as const, actor, reason: 'cancelled by operator' }]
    : null;
  if (!transitions) throw new BerthError('run_not_cancellable', `run ${runId} is ${from}; only admitted, running, retrying or waiting runs can be cancelled`, { ids: { runId } });
  const r = await ctx.store.commit({ sessionId: run.sessionId, label: 'run.cancel', actor, runTransitions: transitions, cancelTasks: run.rootTaskId ? [run.rootTaskId] : [] });
  if (!r.ok) throw new BerthError('cancel_conflict', `run ${runId} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId } });
  emit(ctx.json, { runId, requested: true }, () => `cancel of run ${runId} committed; the host running it stops it now (if none is, berth resume ${runId} finishes the cancellation)`);
  return 0;
}

/** `berth logs RUN`: what each step printed (tails kept with the step's result), and every egress attempt of the run. */
export async function logs(ctx: CliContext, runId: string): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const entries = await ctx.store.listEntries(run.sessionId, { runId });
  const steps = entries.filter((e) => e.kind === 'plan.step.output').map((e) => e.body as unknown as StepResult);
  const egress = entries.filter((e) => e.kind === EGRESS_ENTRY).map((e) => e.body as unknown as Omit<EgressAttempt, 'runId'>);
  const network = entries.filter((e) => e.kind === 'egress.open' || e.kind === 'egress.override').map((e) => ({ kind: e.kind, ...(e.body as object) }));
  emit(ctx.json, { runId, steps, egress, network }, () =>
    [
      ...network.map((n) => (n.kind === 'egress.open' ? '[network] open: outside hosts reachable, not audited' : '[network] allow list accepted with allowOverride')),
      steps.length === 0
        ? `run ${runId} has no finished steps yet`
        : steps.map((s) => [`── ${s.step} (exit ${s.exitCode}, ${duration(s.durationMs)})`, s.stdoutTail.trimEnd(), s.stderrTail ? `[stderr]\n${s.stderrTail.trimEnd()}` : ''].filter(Boolean).join('\n')).join('\n'),
      ...egress.map((a) => `[egress] ${new Date(a.at).toISOString()} ${a.decision} ${a.method} ${a.target} (${a.reason}; ${a.bytesOut} B out, ${a.bytesIn} B in)`),
    ].join('\n'),
  );
  return 0;
}
