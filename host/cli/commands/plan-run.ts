import { userInfo } from 'node:os';
import { BerthError } from '../../errors';
import { isFinalRunState, type Effect, type Json, type Run } from '../../model';
import { pruneSnapshots } from '../../snapshot';
import type { EffectWrite } from '../../store';
import { loadPlan, submitPlan, type PlanRunInput, type StepResult } from '../../plan';
import { sandboxDocId, type SandboxPointer } from '../../run-sandbox';
import { engineCapacity, snapshotEngine } from '../../sandbox';
import { checkEngineCapacity } from '../../../environment';
import { EGRESS_ENTRY, isNetworkAttempt, type EgressAttempt } from '../../egress';
import { createHostRuntime, type HostRuntime } from '../../runtime/host-runtime';
import type { CliContext } from '../context';
import { duration, emit, escapeControl, LOG_COLUMN, outputLines, table } from '../output';
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
  const steps = tasks.filter((t) => t.kind === 'plan-step').map((t) => ({ outcome: t.outcome, status: t.status, code: t.error?.code, ...((t.result ?? t.error?.details ?? {}) as Partial<StepResult>) }));
  const transitions = await ctx.store.listRunTransitions(run.id);
  const reason = transitions.at(-1)?.reason ?? '';
  emit(ctx.json, { run, reason, steps }, () =>
    [
      '',
      table([['STEP', 'RESULT', 'EXIT', 'TIME', 'SNAPSHOT'], ...steps.map((s) => [s.step ?? '?', s.rewind !== undefined ? `rewound to step ${s.rewind + 1}` : s.alreadyDone ? 'ran before' : s.code && s.code !== 'step_failed' ? s.code : (s.outcome ?? s.status), String(s.exitCode ?? '-'), s.durationMs === undefined ? '-' : duration(s.durationMs), s.snapshotId ?? '-'])]),
      '',
      `run ${run.id}: ${run.state}${reason ? ` (${reason})` : ''}`,
      run.state === 'needs_reconciliation' ? `decide with: berth reconcile ${run.id} [--accept | --reject-effect] [--restore SNAPSHOT] | --fail   (berth show ${run.id} lists snapshots)` : '',
    ].filter((l, i, a) => l !== '' || i !== a.length - 1).join('\n'),
  );
}

/** `berth run PLAN`. */
export async function runPlan(ctx: CliContext, file: string, requestId?: string): Promise<number> {
  const loaded = await loadPlan(file);
  // Before anything is submitted: the engine's own error for these would come at container create.
  checkEngineCapacity(loaded.environment, await engineCapacity(ctx.docker));
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
}

const settle = (actor: string, effects: Effect[], answer: 'accepted' | 'rejected'): EffectWrite[] =>
  effects.map((e): EffectWrite => ({
    id: e.id,
    expectStatus: e.status,
    set:
      answer === 'accepted'
        ? { status: 'confirmed', receipt: { resolvedBy: actor, decision: 'accept', note: 'outcome unknown; accepted by the operator' } }
        : { status: 'failed', receipt: { resolvedBy: actor, decision: 'reject' }, error: { code: 'operator_rejected', message: `settled by ${actor}: did not happen` } },
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
  if (choice.accept && reject) throw new BerthError('usage', '--accept (the effect happened) and --reject-effect (it did not) exclude each other');
  if (!choice.accept && !reject && choice.restore === undefined && !choice.fail) {
    throw new BerthError('usage', 'reconcile needs a decision: --accept or --reject-effect (did the uncertain effect happen), --restore SNAPSHOT (continue from a snapshot), or --fail');
  }
  if (choice.fail && choice.restore !== undefined) throw new BerthError('usage', '--fail ends the run; it takes no --restore');
  const run = await getRunOrThrow(ctx.store, runId);
  if (run.state !== 'needs_reconciliation') {
    throw new BerthError('run_not_reconcilable', `run ${runId} is ${run.state}, not needs_reconciliation`, { ids: { runId } });
  }
  const actor = operator();
  const uncertain = (await ctx.store.listEffects({ runId })).filter((e) => e.status === 'unknown' || e.status === 'executing');
  const answer = choice.accept ? 'accepted' : reject ? 'rejected' : undefined;
  if (uncertain.length && !answer) {
    throw new BerthError('effect_answer_needed', `run ${runId} has ${uncertain.length} effect(s) that may or may not have happened (${uncertain.map((e) => e.id).join(', ')}): add --accept if they did, --reject-effect if they did not`, { ids: { runId } });
  }
  const effects = answer ? settle(actor, uncertain, answer) : [];
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
 * `--accept` / `--reject-effect` for a run whose root task has already ended (an agent run that
 * told the model about an uncertain call and finished): the operator says whether the uncertain
 * effects happened; the run ends as its root did.
 */
async function acceptSettledRun(ctx: CliContext, run: Run, actor: string, effects: EffectWrite[], answer: 'accepted' | 'rejected'): Promise<number> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  if (!root || root.status !== 'terminal') {
    throw new BerthError('run_not_reconcilable', `run ${run.id} has no task waiting for an operator and its root task has not ended; only --fail applies`, { ids: { runId: run.id } });
  }
  const to = root.outcome === 'ok' ? 'completed' : 'failed';
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
