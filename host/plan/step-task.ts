import { rejected, storedValue, type PhaseContext, type TypedDecision, type TypedPhaseContext } from '../kernel';
import { plainJson, type Effect, type Json, type Task } from '../model';
import { BerthError, isBerthError } from '../errors';
import type { Lease } from '../sandbox';
import { resolveSecrets, type ResolvedSecret } from '../secrets';
import { execStep, stepExecTag, type StepReceipt } from './step-exec';
import { sandboxDocId, type RunSandbox, type SandboxPointer } from '../run-sandbox';
import { PlanRunInputSchema, type PlanProgress, type PlanRunInput, type StepInput, type StepResult, type StepTaskResult } from './plan-input';
import { nextIndexOf, stepEffectId } from './checkpoints';
import { isAcceptanceStep, runSteps } from './plan-schema';
import { stepArtifacts } from './step-artifacts';
import type { ArtifactStore } from '../artifacts';
import { OutputWriter } from '../output';

const SANDBOX_GONE = new Set(['sandbox_unavailable', 'container_missing', 'container_stopped', 'engine_unreachable', 'engine_error', 'lease_released']);

/** The run's sandbox pointer as committed. */
export async function readPointer(ctx: PhaseContext, runId: string): Promise<SandboxPointer> {
  return ((await ctx.readDocument<SandboxPointer & Json>(sandboxDocId(runId)))?.state ?? { leaseId: null, snapshotId: null, workspaceDigest: null }) as SandboxPointer;
}

/**
 * The effects of step `index` in generations before `generation`, newest first. A `never` step
 * whose effect happened (or may have) in an earlier generation is not executed again when a
 * reconciliation re-runs the steps around it.
 */
export async function earlierEffects(ctx: PhaseContext, runId: string, index: number, generation: number): Promise<Effect[]> {
  const ids = new Set(Array.from({ length: generation }, (_, g) => stepEffectId(runId, index, g)));
  return (await ctx.store.listEffects({ runId })).filter((e) => ids.has(e.id)).reverse();
}

/** A step's snapshot taking longer than this is announced (its end line waits for it); `BERTH_SLOW_SNAPSHOT_MS` sets it (tests: 0). */
function slowSnapshotMs(): number {
  const v = Number(process.env.BERTH_SLOW_SNAPSHOT_MS);
  return process.env.BERTH_SLOW_SNAPSHOT_MS && Number.isFinite(v) && v >= 0 ? v : 2_000;
}

/**
 * A sandbox that stopped answering mid-step (engine restart, container gone) is a reason to retry
 * the phase, not to fail the step: the retry finds the step in flight and verifies, restores or
 * reconciles the sandbox before anything runs again.
 */
function sandboxLost(err: unknown, sb: RunSandbox, runId: string): unknown {
  if (!isBerthError(err) || !SANDBOX_GONE.has(err.code)) return err;
  sb.forget(runId);
  return new BerthError(err.code, err.message, { retryable: true, ids: { ...err.ids, runId }, cause: err });
}

async function parentOf(ctx: PhaseContext): Promise<Task> {
  const parent = ctx.task.parentId ? await ctx.store.getTask(ctx.task.parentId) : undefined;
  if (!parent) throw new BerthError('plan_corrupt', `step task ${ctx.task.id} has no plan task`, { ids: { taskId: ctx.task.id } });
  return parent;
}

/** What a step task's phase decides: its result is a {@link StepTaskResult}, validated before commit. */
export type StepDecision = TypedDecision<Json, StepTaskResult>;

/**
 * Parsed plan inputs by root task id, the most recently used few: a task's input never changes, and
 * reading and parsing the root's (every step of the plan) at each step made a step's cost grow with the plan.
 */
const rootInputs = new Map<string, PlanRunInput>();
const ROOT_INPUTS_KEPT = 32;

/** The plan run's input, from the plan task that owns this step, parsed as the root's kind would parse it. */
async function runInputOf(ctx: PhaseContext): Promise<PlanRunInput> {
  const rootId = ctx.task.parentId;
  const kept = rootId ? rootInputs.get(rootId) : undefined;
  if (kept) {
    rootInputs.delete(rootId!);
    rootInputs.set(rootId!, kept);
    return kept;
  }
  const root = await parentOf(ctx);
  const input = storedValue(PlanRunInputSchema, root.input, { what: 'input', kind: root.kind, taskId: root.id, readBy: ctx.task.id });
  rootInputs.set(root.id, input);
  if (rootInputs.size > ROOT_INPUTS_KEPT) rootInputs.delete(rootInputs.keys().next().value!);
  return input;
}

const parked = (step: string, reason: string, writes?: StepDecision['writes']): StepDecision => ({
  type: 'complete',
  result: { step, exitCode: -1, timedOut: false, oomKilled: false, durationMs: 0, snapshotId: null, stdoutTail: '', stderrTail: '', reconcile: reason },
  ...(writes ? { writes } : {}),
});

/**
 * One plan step. A step whose effect is confirmed is never executed again: a retry or a resume
 * only takes the snapshot it is missing. A `never` step that may have run (in flight when a host
 * died, or in an earlier generation) is reported, never started again.
 */
export async function runStep(ctx: TypedPhaseContext<StepInput>, sb: RunSandbox, progress: (p: PlanProgress) => void, artifacts?: ArtifactStore): Promise<StepDecision> {
  const { index, generation } = ctx.value;
  const input = await runInputOf(ctx);
  const runId = ctx.task.runId!;
  const step = runSteps(input.plan)[index]!;
  const env = input.environment;
  const effectId = stepEffectId(runId, index, generation);
  const spec = { id: effectId, kind: 'plan.step', intent: { step: step.name, run: step.run } as Json, replay: step.replay };
  // resources.runBudgetS: the commands of the run's steps may take that long in all. A step gets
  // what its predecessors left as its longest run; with nothing left it is not started.
  const budgetMs = ctx.value.budgetMs;
  const ownTimeoutMs = (step.timeoutS ?? env.resources.commandTimeoutS) * 1000;
  const timeoutMs = budgetMs === undefined ? ownTimeoutMs : Math.max(0, Math.min(ownTimeoutMs, budgetMs));
  const byBudget = timeoutMs < ownTimeoutMs;
  const overBudget = `the run's budget of ${env.resources.runBudgetS} s (resources.runBudgetS: its steps' commands in all)`;
  if (timeoutMs <= 0) return { type: 'fail', error: { code: 'run_budget_exceeded', message: `${step.name} was not started: the earlier steps used up ${overBudget}` } };
  const prior = await ctx.store.getEffect(effectId);
  const ptr = await readPointer(ctx, runId);

  if (step.replay === 'never') {
    const before = (await earlierEffects(ctx, runId, index, generation)).find((e) => e.status === 'confirmed' || e.status === 'executing' || e.status === 'unknown');
    if (before?.status === 'confirmed') {
      // It happened in an earlier generation (a restore went back to before it): report it, do not repeat it.
      const r = before.receipt as Partial<StepReceipt> | null;
      const result: StepResult = { step: step.name, exitCode: r?.exitCode ?? 0, timedOut: false, oomKilled: false, durationMs: 0, snapshotId: null, stdoutTail: '', stderrTail: '', alreadyDone: before.id };
      return { type: 'complete', result };
    }
    if (before) return { type: 'interrupt', reason: `step ${step.name} (replay never) may have run as ${before.id} (${before.status}); it is not started again`, result: { step: step.name, interrupted: true } };
    if (prior?.status === 'executing' || prior?.status === 'unknown') {
      // In flight when a host stopped: the command that host started may still be running. It is
      // stopped (and every other sandbox an earlier owner left removed) before anything is judged,
      // so that an operator answering from what he sees cannot get the step run twice.
      const stopped = await sb.stopEarlier(runId, ctx.task.sessionId, env, ptr, stepExecTag(runId, index));
      const out = await ctx.perform(spec, async () => {
        throw new BerthError('plan_corrupt', `step ${step.name} (replay never) would be started again`, { ids: { runId, effectId } });
      });
      if (out.status === 'uncertain') return { type: 'interrupt', reason: `${out.reason}; ${stopped}`, result: { step: step.name, interrupted: true, earlier: stopped }, writes: { entries: sb.takeSweeps(runId) } };
    }
  }

  const docOps: Json[] = [];
  let receipt = prior?.status === 'confirmed' ? (prior.receipt as StepReceipt) : null;
  let lease: Lease | undefined;
  let actionId = effectId;
  if (receipt) {
    // The step ran; only what follows it (snapshot or digest) is missing.
    const after = await sb.afterRun(runId, env, ptr);
    if (after.kind === 'ok') lease = after.lease;
    else if (step.replay === 'never') {
      return parked(step.name, `step ${step.name} (replay never) ran and its effect is confirmed, but the sandbox it changed is gone (${after.reason}) before its snapshot: its workspace changes are lost`, { entries: sb.takeSweeps(runId) });
    } else receipt = null;
  }
  if (!lease) {
    const ensured = await sb.ensureOrBehind(runId, ctx.task.sessionId, env, ptr, { inFlight: prior?.status === 'executing', replay: step.replay, signal: ctx.signal });
    if (ensured.kind === 'reconcile') return parked(step.name, ensured.reason, { entries: sb.takeSweeps(runId) });
    if (ensured.kind === 'behind') {
      const decision = await rewind(ctx, sb, input, index, ensured);
      // A safe step caught mid-run whose sandbox is gone: its partial changes went with the
      // sandbox and the run goes back before it, so its attempt is settled as not applied (it
      // runs again as a new action); left in flight it would keep the run from ever ending.
      if (typeof (decision as { result?: { rewind?: unknown } }).result?.rewind === 'number' && step.replay === 'safe' && (prior?.status === 'executing' || prior?.status === 'unknown')) {
        await ctx
          .perform(spec, async () => {
            throw rejected(`step ${step.name} was caught mid-run on a sandbox that is gone; the run goes back to snapshot ${ensured.snapshotId}`, { code: 'step_superseded' });
          })
          .catch((err: unknown) => {
            if (!isBerthError(err, 'step_superseded')) throw err;
          });
      }
      return decision;
    }
    if (Object.keys(ensured.pointer).length) docOps.push(ensured.pointer as Json);
    lease = ensured.lease;
    // A safe step that ran on a sandbox lost before its snapshot runs again on the restored one, as a new action.
    if (prior?.status === 'confirmed' && ensured.pointer.leaseId) actionId = `${effectId}:after-restore:${ensured.pointer.leaseId}`;
  }
  const held = lease;
  // What this process verified of the sandbox before the step used it (after a restart): committed with the step, the run's evidence that it checked.
  const verifiedEntry = sb.takeEntriesFor(ctx, runId);
  if (!receipt) {
    progress({ type: 'step-start', runId, index, step: step.name, command: step.run });
    let secrets: ResolvedSecret[];
    try {
      // Every secret of the run, not only the step's: a value one step stashed can be printed by any later one.
      secrets = await resolveSecrets(env.secrets, [...new Set(input.plan.steps.flatMap((s) => s.secrets))], { runId, taskId: ctx.task.id });
    } catch (err) {
      if (!isBerthError(err)) throw err;
      return { type: 'fail', error: { code: err.code, message: `step ${step.name}: ${err.message}` } };
    }
    // A new attempt's output: what an attempt a crash cut off printed stays in the store beside it.
    // BERTH_LIVE_OUTPUT=off keeps only the receipt's tails (the buffered capture of before; the bench compares the two).
    const output = process.env.BERTH_LIVE_OUTPUT === 'off' ? undefined : new OutputWriter(ctx.store, { runId, source: `step:${index}`, label: step.name, now: () => ctx.now(), onError: (err) => ctx.log.warn({ runId, err }, 'live output of a step could not be written; its receipt keeps the tails') });
    const out = await ctx.perform({ ...spec, id: actionId }, async (signal) =>
      profiled(ctx, index, output, () => execStep(held, step, env, secrets, { runId, index, signal, progress, output, timeoutMs }))
        .then(async (r) => {
          // Recorded before the receipt's commit: a command that ran is paid for, even when the
          // host dies before its result is committed and the step runs again.
          if (r.usage) await ctx.store.recordCost({ runId, at: ctx.now(), key: held.id, meters: { 'cpu.usec': r.usage.cpuUsec, 'memory.byte_ms': r.usage.memoryByteMs, 'exec.count': 1 } });
          // A command cut off by a cancel may have done part of its work: not an outcome, uncertain.
          if (signal.aborted) throw new BerthError('step_cancelled', `step ${step.name} was stopped by cancel while running`, { ids: { runId } });
          // A command the engine killed by stopping the container has no outcome of its own.
          if (held.lost || r.exitCode === -1) throw new BerthError('sandbox_unavailable', `the sandbox stopped during step ${step.name}`, { ids: { runId } });
          return plainJson(r);
        })
        .catch((err: unknown) => {
          throw sandboxLost(err, sb, runId);
        }),
    );
    if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason, result: { step: step.name, interrupted: true } };
    receipt = out.receipt as unknown as StepReceipt;
  }
  const r = receipt;
  const writes: NonNullable<StepDecision['writes']> = {};
  let snapshotId: string | null = null;
  if (r.diskExceeded) {
    // The layer is over the limit: never snapshotted (nor measured again), and the run stops here.
    const result: StepResult = { step: step.name, exitCode: r.exitCode, timedOut: r.timedOut, oomKilled: r.oomKilled, diskExceeded: true, pidsLimited: r.pidsLimited ?? false, durationMs: r.durationMs, snapshotId: null, stdoutTail: r.stdoutTail, stderrTail: r.stderrTail };
    progress({ type: 'step-end', runId, index, step: step.name, exitCode: r.exitCode, durationMs: r.durationMs, snapshotId: null });
    const message = `${step.name} wrote more than the sandbox's disk limit of ${env.resources.diskMb} MB (all files together); its state was not snapshotted`;
    return { type: 'fail', error: { code: 'disk_exceeded', message, details: plainJson(result) }, writes: { entries: [...verifiedEntry, { kind: 'plan.step.output', body: plainJson(result) }] } };
  }
  // Copied out before the snapshot, from the sandbox the step ran in; a refusal fails the step below.
  const kept = r.exitCode === 0 && !r.timedOut && step.artifacts.length > 0
    ? await stepArtifacts(sb.held(runId) ?? held, { step, input, store: artifacts, ids: { runId, taskId: ctx.task.id }, signal: ctx.signal }).catch((err: unknown) => {
        throw sandboxLost(err, sb, runId);
      })
    : undefined;
  if (env.snapshot.policy === 'after-each-step') {
    // A big layer takes seconds to copy, and the step's end line waits for its snapshot: said
    // when it is slow, so the operator does not take a finished command for a running one.
    const slow = setTimeout(() => progress({ type: 'sandbox', runId, message: `${step.name} ended (exit ${r.exitCode} in ${(r.durationMs / 1000).toFixed(1)}s); taking its snapshot` }), slowSnapshotMs());
    const s = await sb.snapshot(runId, ctx.task.sessionId, env, sb.held(runId) ?? held, `step:${index}:${step.name}`, ptr.snapshotId, ctx.signal).catch((err: unknown) => {
      throw sandboxLost(err, sb, runId);
    }).finally(() => clearTimeout(slow));
    snapshotId = s.record.id;
    writes.snapshots = [s.record];
    docOps.push(s.pointer as Json);
  } else {
    docOps.push({ leaseId: held.id, workspaceDigest: await sb.digest(held, env, ctx.signal).catch((err: unknown) => { throw sandboxLost(err, sb, runId); }) });
  }
  writes.documents = docOps.map((op) => ({ documentId: sandboxDocId(runId), op }));
  const result: StepResult = { step: step.name, exitCode: r.exitCode, timedOut: r.timedOut, oomKilled: r.oomKilled, diskExceeded: false, pidsLimited: r.pidsLimited ?? false, durationMs: r.durationMs, snapshotId, stdoutTail: r.stdoutTail, stderrTail: r.stderrTail, ...(r.outputDigest ? { outputDigest: r.outputDigest } : {}) };
  writes.entries = [...verifiedEntry, { kind: 'plan.step.output', body: plainJson(result) }];
  progress({ type: 'step-end', runId, index, step: step.name, exitCode: r.exitCode, durationMs: r.durationMs, snapshotId });
  if (kept?.kind === 'refused') return { type: 'fail', error: { code: kept.error.code, message: kept.error.message, details: plainJson(result) }, writes };
  if (kept?.kind === 'ok') {
    result.artifacts = kept.files.length;
    writes.artifacts = kept.files.map((f) => ({ id: `${ctx.task.id}:${f.path}`, stepIndex: index, generation, step: step.name, path: f.path, sizeBytes: f.sizeBytes, sha256: f.sha256, snapshotId, mode: f.mode }));
    if (kept.skipped.length) writes.entries.push({ kind: 'plan.artifacts.skipped', body: plainJson({ step: step.name, skipped: kept.skipped }) });
    progress({ type: 'sandbox', runId, message: `kept ${kept.files.length} artifact(s) of ${step.name} (${kept.files.reduce((n, f) => n + f.sizeBytes, 0)} bytes)${kept.skipped.length ? `; skipped ${kept.skipped.map((s) => `${s.path}: ${s.why}`).join(', ')}` : ''}` });
  }
  // The acceptance command's exit is a judgement, not a failure: the plan root records it.
  if ((r.exitCode === 0 && !r.timedOut) || isAcceptanceStep(input.plan, index)) return { type: 'complete', result, writes };
  if (r.timedOut && byBudget) return { type: 'fail', error: { code: 'run_budget_exceeded', message: `${step.name} was stopped after ${(r.durationMs / 1000).toFixed(1)} s: it used up ${overBudget}`, details: plainJson(result) }, writes };
  const why = r.timedOut ? 'timed out' : r.oomKilled ? `was killed for memory (exit ${r.exitCode})` : r.pidsLimited ? `could not fork: the sandbox's pids limit of ${env.resources.pids} was reached (exit ${r.exitCode})` : `exited ${r.exitCode}`;
  return { type: 'fail', error: { code: r.pidsLimited ? 'pids_exceeded' : 'step_failed', message: `${step.name} ${why}`, details: plainJson(result) }, writes };
}

/**
 * The sandbox is gone and its newest snapshot predates steps that changed the workspace since
 * (`snapshot.policy: on-demand`). Restoring it and going on would silently drop their changes: when
 * every one of them is `safe`, the run goes back to the snapshot and runs them again; otherwise it
 * asks the operator, naming what a restore would lose.
 */
async function rewind(ctx: PhaseContext, sb: RunSandbox, input: PlanRunInput, index: number, behind: { snapshotId: string; checkpoint: string }): Promise<StepDecision> {
  const runId = ctx.task.runId!;
  const step = runSteps(input.plan)[index]!;
  const from = nextIndexOf(behind.checkpoint);
  const lost = input.plan.steps.slice(from, index);
  const never = lost.filter((s) => s.replay === 'never');
  if (never.length) {
    return parked(
      step.name,
      `the sandbox is gone and its newest snapshot ${behind.snapshotId} (${behind.checkpoint}) is older than the workspace: restoring it would lose the changes of steps ${lost.map((s) => s.name).join(', ')}, and ${never.map((s) => s.name).join(', ')} is replay never`,
    );
  }
  const ensured = await sb.restore(runId, ctx.task.sessionId, input.environment, behind.snapshotId, ctx.signal);
  if (ensured.kind !== 'ok') return parked(step.name, ensured.kind === 'reconcile' ? ensured.reason : `snapshot ${behind.snapshotId} cannot be restored`);
  ctx.log.info({ runId, snapshotId: behind.snapshotId, from }, 'sandbox restored from an older snapshot; re-running the safe steps after it');
  const result: StepResult = { step: step.name, exitCode: -1, timedOut: false, oomKilled: false, durationMs: 0, snapshotId: null, stdoutTail: '', stderrTail: '', rewind: from };
  return { type: 'complete', result, writes: { documents: [{ documentId: sandboxDocId(runId), op: ensured.pointer as Json }] } };
}

/**
 * Runs a step's command and, at debug level, logs its wall time beside the command's own and the CPU
 * this process spent meanwhile (`step.exec`): on a small machine every host millisecond during a
 * step is taken from the build, and the plan benchmark reads this to say where a step's time goes.
 */
async function profiled(ctx: PhaseContext, index: number, output: OutputWriter | undefined, fn: () => Promise<StepReceipt>): Promise<StepReceipt> {
  if (!ctx.log.isLevelEnabled('debug')) return fn();
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const r = await fn();
  const cpu = process.cpuUsage(cpu0);
  ctx.log.debug({ phase: 'step.exec', index, ms: Math.round(performance.now() - t0), commandMs: Math.round(r.durationMs), hostCpuMs: Math.round((cpu.user + cpu.system) / 1000), ...(r.usage ? { sandboxCpuMs: Math.round(r.usage.cpuUsec / 1000) } : {}), ...(output ? { outputWrites: output.writes.count, outputWriteMs: Math.round(output.writes.ms), outputWriteMaxMs: Math.round(output.writes.maxMs) } : {}) }, 'timing');
  return r;
}
