import { userInfo } from 'node:os';
import { acceptanceOf } from '../../acceptance';
import { acceptanceLine } from './acceptance';
import { BerthError } from '../../errors';
import { isFinalRunState, type Run } from '../../model';
import { deletePrunedManifests, pruneSnapshots } from '../../snapshot';
import { manifestGcDeps } from './gc';
import { loadPlan, runSteps, submitPlan, type PlanRunInput, type StepResult } from '../../plan';
import { engineCapacity, snapshotEngine } from '../../sandbox';
import { checkEngineCapacity } from '../../../environment';
import type { HostRuntime } from '../../runtime/host-runtime';
import { cliRuntime } from '../cli-runtime';
import { releaseEndedRunLeases } from '../../runtime/run-end-leases';
import { forkPointsInUse } from '../../fork';
import type { CliContext } from '../context';
import type { RunTransitionInput, Store } from '../../store';
import { duration, emit, table } from '../output';
import { getRunOrThrow } from './runs';
import { readHost } from './run-driver';
import { EXIT, whileHoldingRight } from '../host-right';
import { runExit } from '../output';
import { progressPrinter } from './progress';
import { checkImageOnEngine, checkPlanSecrets } from './preflight';
import { followRun, startAgentHost } from './agent-host';
import { fleetRuntime, leaseTtlMs } from './worker';
import { finishAgentRun } from './agent-run';
import type { Environment } from '../../../environment';

export const operator = () => `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;

/**
 * The host for one CLI invocation: sweeps leftovers and starts a kernel that owns the sessions it
 * creates or is given with {@link takeRun}; it drives nothing else of the store.
 */
export async function startHost(ctx: CliContext, total: () => number, ttlMs?: number): Promise<HostRuntime> {
  const rt = cliRuntime(ctx, { claim: 'own', ttlMs, onProgress: progressPrinter(ctx.json, total) });
  const swept = [...(await ctx.sandbox.sweep()), ...(await releaseEndedRunLeases(ctx))];
  if (swept.length && !ctx.json) process.stderr.write(`  swept ${swept.length} leftover container(s)\n`);
  await rt.kernel.start();
  return rt;
}

/**
 * Makes this host the run's owner (DESIGN.md "More than one host"): a claim on its session,
 * refused while a live host owns it unless `takeOver`, which is recorded on the run's transition
 * log with the operator as actor. A dead process of this machine, a released claim or one whose
 * lease ran out is taken at once. On refusal the kernel is stopped and `run_owned` names the owner.
 */
export async function takeRun(ctx: CliContext, rt: HostRuntime, run: Run, opts: { takeOver?: boolean } = {}): Promise<number> {
  const claim = await rt.kernel.claim(run.sessionId, { takeOver: opts.takeOver });
  if (!claim.ok) {
    await rt.kernel.stop();
    const o = claim.owner;
    throw new BerthError(
      'run_owned',
      `run ${run.id} is owned by host ${o.holder}${o.pid ? ` (pid ${o.pid})` : ''}, epoch ${o.epoch}, heartbeat ${duration(claim.now - o.heartbeatAt)} ago, lease valid for ${duration(o.leaseUntil - claim.now)} more; ` +
        `it is alive, so nothing was changed. Let it finish, or take the run over: berth resume ${run.id} --take-over`,
      { ids: { runId: run.id, sessionId: run.sessionId }, details: { owner: o } },
    );
  }
  const previous = claim.previous;
  if (opts.takeOver && previous && previous.stoppedAt === null && previous.leaseUntil >= claim.now && !isFinalRunState(run.state)) {
    const actor = operator();
    const reason = `taken over by ${actor} from host ${previous.holder}${previous.pid ? ` pid ${previous.pid}` : ''} (epoch ${previous.epoch} -> ${claim.epoch})`;
    const current = (await ctx.store.getRun(run.id)) ?? run;
    const r = await rt.kernel.commit({ sessionId: run.sessionId, label: 'run.take-over', actor, runTransitions: [{ runId: run.id, from: current.state, to: current.state, actor, reason, ownerChange: true }] });
    if (!r.ok) ctx.logger.warn({ conflict: r.conflict }, 'take-over transition not recorded');
  }
  return claim.epoch;
}

/** Drives the run until it settles, or until Ctrl-C (then it stops without deciding anything: `berth resume` continues). */
export async function drive(ctx: CliContext, rt: HostRuntime, runId: string): Promise<number> {
  const stop = new AbortController();
  const onSignal = () => stop.abort(new BerthError('interrupted', 'stopped by signal'));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let run: Run;
  try {
    const sessionId = (await ctx.store.getRun(runId))?.sessionId;
    run = await whileHoldingRight(rt.kernel, runId, rt.kernel.waitForRun(runId, { signal: stop.signal, states: ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'] }), sessionId);
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
    // A sandbox whose record was closed while its container could not be removed (the engine was
    // restarting, the container stopped) is the sweeper's: at the end, not only at the next start.
    await ctx.sandbox.sweep().catch((err: unknown) => ctx.logger.warn({ err, runId: run.id }, 'end-of-run sweep failed; berth gc removes what is left'));
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
  await pruneSnapshots({ store: ctx.store, removeSnapshot: engine.removeSnapshot, clock: ctx.clock, logger: ctx.logger, inUse: () => forkPointsInUse(ctx.store) }, { keepLast, sessionId: run.sessionId });
  // The pushed copies go too; a registry that does not answer is logged and left to `berth gc`.
  await deletePrunedManifests(manifestGcDeps(ctx), { sessionId: run.sessionId });
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
  const plan = (root?.input as unknown as PlanRunInput | undefined)?.plan;
  const names = (plan?.steps ? runSteps(plan) : []).map((s) => s.name);
  // A step stopped by cancel has no command result; its name comes from the plan, its outcome says cancelled.
  const steps = tasks.filter((t) => t.kind === 'plan-step').map((t) => {
    const r = (t.result ?? t.error?.details ?? {}) as Partial<StepResult>;
    const by = t.outcome === 'interrupted' && r.step ? acceptedBy.get(r.step) : undefined;
    return { step: names[(t.input as { index?: number }).index ?? -1], outcome: t.outcome, status: t.status, code: t.error?.code, ...r, ...(by ? { acceptedBy: by } : {}) };
  });
  const transitions = await ctx.store.listRunTransitions(run.id);
  const reason = transitions.at(-1)?.reason ?? '';
  const acceptance = await acceptanceOf(ctx.store, run);
  emit(ctx.json, { run, reason, steps, acceptance }, () =>
    [
      '',
      table([['STEP', 'RESULT', 'EXIT', 'TIME', 'SNAPSHOT'], ...steps.map((s) => [s.step ?? '?', s.acceptedBy ? `accepted by ${s.acceptedBy}` : s.rewind !== undefined ? `rewound to step ${s.rewind + 1}` : s.alreadyDone ? 'ran before' : s.code && s.code !== 'step_failed' ? s.code : (s.outcome ?? s.status), String(s.exitCode ?? '-'), s.durationMs === undefined ? '-' : duration(s.durationMs), s.snapshotId ?? '-'])]),
      '',
      `run ${run.id}: ${run.state}${reason ? ` (${reason})` : ''}`,
      ...(acceptance.state === 'none' ? [] : [`acceptance: ${acceptanceLine(acceptance, run.id)}`]),
      run.state === 'needs_reconciliation' ? `decide with: berth reconcile ${run.id} [--accept | --reject-effect] [--restore SNAPSHOT] | --fail   (berth show ${run.id} lists snapshots)` : '',
    ].filter((l, i, a) => l !== '' || i !== a.length - 1).join('\n'),
  );
  return reason;
}

/** `berth run PLAN [--detach]`: `--detach` submits the run for a `berth worker` and returns at once. */
export async function runPlan(ctx: CliContext, file: string, requestId?: string, detach = false, tags: string[] = []): Promise<number> {
  const loaded = await loadPlan(file);
  // Before anything is submitted: the engine's own error for these would come at container create.
  checkEngineCapacity(loaded.environment, await engineCapacity(ctx.docker));
  // Everything checkable is checked before the run exists: a run is created only to be driven.
  await checkImageOnEngine(ctx.docker, loaded.environment as Environment & { image: { digest: string } }, loaded.environmentFile);
  await checkPlanSecrets(loaded);
  if (detach) return submitDetached(ctx, loaded, requestId, tags);
  // The acceptance command, when the plan has one, runs as the last step.
  const rt = await startHost(ctx, () => runSteps(loaded.plan).length);
  const { run, created } = await submitPlan(rt, loaded, requestId);
  // Submitted before (same request id): driven here only as its owner, like a resume.
  if (!created) await takeRun(ctx, rt, run);
  if (!ctx.json) process.stderr.write(`${created ? 'started' : 'already submitted as'} run ${run.id} (${loaded.plan.steps.length} steps, image ${loaded.environment.image.ref})\n`);
  return drive(ctx, rt, run.id);
}

export async function stepCount(ctx: CliContext, run: Run): Promise<number> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  const plan = (root?.input as unknown as PlanRunInput | undefined)?.plan;
  return plan?.steps ? runSteps(plan).length : 0;
}

/** `berth resume RUN [--take-over]`: this host claims the run's session (see {@link takeRun}) and drives it. */
export async function resumeRun(ctx: CliContext, runId: string, opts: { takeOver?: boolean; leaseTtl?: string } = {}): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const ttlMs = leaseTtlMs(opts.leaseTtl);
  if (run.kind === 'agent') {
    // An agent run continues with the same live view as berth agent: conversation and tool calls.
    const host = await startAgentHost(ctx, ttlMs);
    const epoch = await takeRun(ctx, host.rt, run, opts);
    if (!ctx.json) process.stderr.write(`resuming run ${runId} (${run.state}) as its owner (epoch ${epoch})\n`);
    return finishAgentRun(ctx, await followRun(ctx, host, run));
  }
  const total = await stepCount(ctx, run);
  const rt = await startHost(ctx, () => total, ttlMs);
  const epoch = await takeRun(ctx, rt, run, opts);
  if (!ctx.json) process.stderr.write(`resuming run ${runId} (${run.state}) as its owner (epoch ${epoch}${total ? `, ${total} steps` : ''})\n`);
  return drive(ctx, rt, runId);
}

/** `berth cancel RUN`: commits the intent; the host driving the run (or the next `berth resume`) carries it out. */
/**
 * The cancel commit of `berth cancel` (and of the web view's cancel button): the run goes to
 * `cancelling` with `actor` and its root task is cancelled durably; the host driving it stops it.
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

export async function cancelRun(ctx: CliContext, runId: string): Promise<number> {
  const transitions = await commitCancel(ctx.store, runId, operator());
  // Cancelled at once (nothing of it was running): its sandboxes go now, as a completed run's do.
  if (transitions.some((t) => isFinalRunState(t.to))) await releaseEndedRunLeases(ctx, [runId]);
  const run = await getRunOrThrow(ctx.store, runId);
  const host = await readHost(ctx.store, ctx.clock.now(), ctx.hostId, run.sessionId);
  emit(ctx.json, { runId, requested: true, owner: host }, () =>
    host?.live
      ? `cancel of run ${runId} committed; host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} drives it and stops it now`
      : `cancel of run ${runId} committed; no live host drives it: berth resume ${runId} finishes the cancellation`,
  );
  return 0;
}

/** `--detach`: the run is saved (admitted) and left for a worker; nothing is driven here. */
async function submitDetached(ctx: CliContext, loaded: Awaited<ReturnType<typeof loadPlan>>, requestId: string | undefined, tags: string[]): Promise<number> {
  const rt = fleetRuntime(ctx, leaseTtlMs(undefined));
  const { run, created } = await submitPlan(rt, loaded, requestId, tags);
  emit(ctx.json, { run, created, detached: true }, () => `${created ? 'submitted' : 'already submitted as'} run ${run.id} (${loaded.plan.steps.length} steps); a berth worker on ${ctx.store.location} drives it (berth show ${run.id})`);
  return EXIT.ok;
}
