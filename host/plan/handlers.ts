import type { Decision, PhaseContext, TaskHandler } from '../kernel';
import type { Json, Task } from '../model';
import { BerthError, isBerthError } from '../errors';
import { resolveSecrets, type ResolvedSecret } from '../secrets';
import { execStep } from './step-exec';
import type { PlanSandbox } from './plan-sandbox';
import type { PlanProgress, PlanRootCheckpoint, PlanRunInput, StepInput, StepResult } from './plan-input';
import { sandboxDocId, SANDBOX_DOC, type SandboxPointer } from './sandbox-doc';
import { stopAbandonedStep } from './step-cancel';

export const PLAN_KIND = 'plan';
export const STEP_KIND = 'plan-step';
async function pointer(ctx: PhaseContext, runId: string): Promise<SandboxPointer> {
  return ((await ctx.readDocument<SandboxPointer & Json>(sandboxDocId(runId)))?.state ?? { leaseId: null, snapshotId: null, workspaceDigest: null }) as SandboxPointer;
}

/** The two task kinds of a plan run: the root walks the steps; each step runs one command. */
export function planHandlers(sb: PlanSandbox, progress: (p: PlanProgress) => void): TaskHandler[] {
  const root: TaskHandler = {
    kind: PLAN_KIND,
    version: 1,
    initialPhase: 'prepare',
    restartLimit: 10,
    phases: {
      prepare: async (ctx) => {
        const input = ctx.input as unknown as PlanRunInput;
        const runId = ctx.task.runId!;
        const lease = await sb.leaseFresh(runId, ctx.task.sessionId, input.environment, ctx.signal);
        progress({ type: 'sandbox', runId, message: `leased ${lease.id} (container ${lease.containerId.slice(0, 12)})` });
        if (input.workspaceDir) {
          const up = await lease.uploadDir(input.workspaceDir, input.environment.workspace.path);
          progress({ type: 'sandbox', runId, message: `uploaded ${up.files} files (${up.bytes} bytes) from ${input.workspaceDir}` });
        }
        const writes: NonNullable<Decision['writes']> = { documents: [{ documentId: sandboxDocId(runId), create: { type: SANDBOX_DOC } }] };
        if (input.environment.snapshot.policy === 'never') {
          const digest = await sb.digest(lease, input.environment, ctx.signal);
          writes.documents!.push({ documentId: sandboxDocId(runId), op: { leaseId: lease.id, workspaceDigest: digest } });
        } else {
          const s = await sb.snapshot(runId, ctx.task.sessionId, input.environment, lease, 'upload', null, ctx.signal);
          writes.snapshots = [s.record];
          writes.documents!.push({ documentId: sandboxDocId(runId), op: s.pointer });
        }
        return { type: 'next', phase: 'step', checkpoint: { index: 0, generation: 0 } satisfies PlanRootCheckpoint as unknown as Json, writes };
      },
      step: async (ctx) => {
        const input = ctx.input as unknown as PlanRunInput;
        const cp = ctx.checkpoint as unknown as PlanRootCheckpoint;
        if (cp.index >= input.plan.steps.length) {
          await sb.finish(ctx.task.runId!);
          const results = (await ctx.children()).filter((c) => c.status === 'terminal').map((c) => c.result);
          return { type: 'complete', result: { steps: results } };
        }
        return { type: 'spawn', join: 'allSettled', phase: 'stepped', tasks: [{ kind: STEP_KIND, input: { index: cp.index, generation: cp.generation } satisfies StepInput as unknown as Json }] };
      },
      stepped: async (ctx) => {
        const input = ctx.input as unknown as PlanRunInput;
        const cp = ctx.checkpoint as unknown as PlanRootCheckpoint;
        const child = (await ctx.children()).at(-1)!;
        const step = input.plan.steps[cp.index]!;
        const result = child.result as unknown as StepResult | null;
        const park = (kind: 'interrupted' | 'reconcile', reason: string): Decision => ({
          type: 'await',
          signal: 'reconcile',
          phase: 'reconciled',
          checkpoint: { ...cp, pending: { kind, index: cp.index, reason } } as unknown as Json,
          run: { to: 'needs_reconciliation', reason },
        });
        if (child.outcome === 'interrupted') {
          return park('interrupted', `step ${step.name} (replay never) was in flight when the host stopped; it may or may not have run`);
        }
        if (result?.reconcile) return park('reconcile', `before step ${step.name}: ${result.reconcile}`);
        if (child.outcome === 'error' && !step.allowFailure) {
          await sb.finish(ctx.task.runId!);
          return { type: 'fail', error: { code: 'step_failed', message: `step ${step.name} failed: ${child.error?.message ?? 'unknown'}` } };
        }
        return { type: 'next', phase: 'step', checkpoint: { index: cp.index + 1, generation: cp.generation } as unknown as Json };
      },
      reconciled: async (ctx) => reconciled(ctx, sb),
    },
  };

  const step: TaskHandler = {
    kind: STEP_KIND,
    version: 1,
    initialPhase: 'run',
    restartLimit: 10,
    // An engine restart can take a while; these retries back off to about 25 s in all.
    maxRetries: 8,
    phases: { run: async (ctx) => runStep(ctx, sb, progress) },
    // A cancel that finds the step left running by a dead host stops its command first.
    stopAbandoned: (task, d) => stopAbandonedStep(sb, task, d),
  };
  return [root, step];
}

const SANDBOX_GONE = new Set(['sandbox_unavailable', 'container_missing', 'container_stopped', 'engine_unreachable', 'engine_error', 'lease_released']);

/**
 * A sandbox that stopped answering mid-step (engine restart, container gone) is a reason to retry
 * the phase, not to fail the step: the retry finds the step in flight and verifies, restores or
 * reconciles the sandbox before anything runs again.
 */
function sandboxLost(err: unknown, sb: PlanSandbox, runId: string): unknown {
  if (!isBerthError(err) || !SANDBOX_GONE.has(err.code)) return err;
  sb.forget(runId);
  return new BerthError(err.code, err.message, { retryable: true, ids: { ...err.ids, runId }, cause: err });
}

async function parentOf(ctx: PhaseContext): Promise<Task> {
  const parent = ctx.task.parentId ? await ctx.store.getTask(ctx.task.parentId) : undefined;
  if (!parent) throw new BerthError('plan_corrupt', `step task ${ctx.task.id} has no plan task`, { ids: { taskId: ctx.task.id } });
  return parent;
}

async function runStep(ctx: PhaseContext, sb: PlanSandbox, progress: (p: PlanProgress) => void): Promise<Decision> {
  const { index, generation } = ctx.input as unknown as StepInput;
  const root = await parentOf(ctx);
  const input = root.input as unknown as PlanRunInput;
  const runId = ctx.task.runId!;
  const step = input.plan.steps[index]!;
  const env = input.environment;
  const effectId = `${runId}:step:${index}:g${generation}`;
  const prior = await ctx.store.getEffect(effectId);
  const ptr = await pointer(ctx, runId);
  const ensured = await sb.ensure(runId, ctx.task.sessionId, env, ptr, { inFlight: prior?.status === 'executing', replay: step.replay, signal: ctx.signal });
  const docOps: Json[] = [];
  if (ensured.kind === 'reconcile') {
    const result: StepResult = { step: step.name, exitCode: -1, timedOut: false, oomKilled: false, durationMs: 0, snapshotId: null, stdoutTail: '', stderrTail: '', reconcile: ensured.reason };
    return { type: 'complete', result: result as unknown as Json };
  }
  if (Object.keys(ensured.pointer).length) docOps.push(ensured.pointer as Json);
  let actionId = effectId;
  if (prior?.status === 'confirmed' && ensured.pointer.leaseId) {
    // The step ran, but the sandbox it changed was lost before its snapshot was committed (the
    // engine went away in between) and has just been restored to the state before the step.
    if (step.replay === 'never') {
      const reason = `step ${step.name} ran, but the sandbox it changed was lost before its snapshot; restored to the state before it`;
      return { type: 'complete', result: { step: step.name, exitCode: -1, timedOut: false, oomKilled: false, durationMs: 0, snapshotId: null, stdoutTail: '', stderrTail: '', reconcile: reason } as unknown as Json };
    }
    actionId = `${effectId}:after-restore:${ensured.pointer.leaseId}`;
  }
  const lease = ensured.lease;
  progress({ type: 'step-start', runId, index, step: step.name, command: step.run });
  let secrets: ResolvedSecret[];
  try {
    secrets = await resolveSecrets(env.secrets, step.secrets, { runId, taskId: ctx.task.id });
  } catch (err) {
    if (!isBerthError(err)) throw err;
    return { type: 'fail', error: { code: err.code, message: `step ${step.name}: ${err.message}` } };
  }
  const out = await ctx.perform({ id: actionId, kind: 'plan.step', intent: { step: step.name, run: step.run }, replay: step.replay }, async (signal) =>
    execStep(lease, step, env, secrets, { runId, index, signal, progress })
      .then((r) => {
        // A command cut off by a cancel may have done part of its work: not an outcome, uncertain.
        if (signal.aborted) throw new BerthError('step_cancelled', `step ${step.name} was stopped by cancel while running`, { ids: { runId } });
        // A command the engine killed by stopping the container has no outcome of its own.
        if (lease.lost || r.exitCode === -1) throw new BerthError('sandbox_unavailable', `the sandbox stopped during step ${step.name}`, { ids: { runId } });
        return r;
      })
      .catch((err: unknown) => {
        throw sandboxLost(err, sb, runId);
      }),
  );
  if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason, result: { step: step.name, interrupted: true } };
  const r = out.receipt as { exitCode: number; timedOut: boolean; oomKilled: boolean; durationMs: number; stdoutTail: string; stderrTail: string };
  const writes: NonNullable<Decision['writes']> = {};
  let snapshotId: string | null = null;
  if (env.snapshot.policy === 'after-each-step') {
    const s = await sb.snapshot(runId, ctx.task.sessionId, env, sb.held(runId) ?? lease, `step:${index}:${step.name}`, ptr.snapshotId, ctx.signal).catch((err: unknown) => {
      throw sandboxLost(err, sb, runId);
    });
    snapshotId = s.record.id;
    writes.snapshots = [s.record];
    docOps.push(s.pointer as Json);
  } else {
    docOps.push({ workspaceDigest: await sb.digest(lease, env, ctx.signal) });
  }
  writes.documents = docOps.map((op) => ({ documentId: sandboxDocId(runId), op }));
  const result: StepResult = { step: step.name, exitCode: r.exitCode, timedOut: r.timedOut, oomKilled: r.oomKilled, durationMs: r.durationMs, snapshotId, stdoutTail: r.stdoutTail, stderrTail: r.stderrTail };
  writes.entries = [{ kind: 'plan.step.output', body: result as unknown as Json }];
  progress({ type: 'step-end', runId, index, step: step.name, exitCode: r.exitCode, durationMs: r.durationMs, snapshotId });
  if (r.exitCode === 0 && !r.timedOut) return { type: 'complete', result: result as unknown as Json, writes };
  const why = r.timedOut ? 'timed out' : r.oomKilled ? `was killed for memory (exit ${r.exitCode})` : `exited ${r.exitCode}`;
  return { type: 'fail', error: { code: 'step_failed', message: `${step.name} ${why}`, details: result as unknown as Json }, writes };
}

/** Carries out the operator's decision, then continues the steps with the run in `reconciling`. */
async function reconciled(ctx: PhaseContext, sb: PlanSandbox): Promise<Decision> {
  const input = ctx.input as unknown as PlanRunInput;
  const cp = ctx.checkpoint as unknown as PlanRootCheckpoint;
  const runId = ctx.task.runId!;
  const decision = cp.reconcile!;
  const next = { ...cp, pending: undefined, reconcile: undefined } as PlanRootCheckpoint;
  if (decision.action === 'restore') {
    const snap = await ctx.store.getSnapshot(decision.snapshotId!);
    const ensured = await sb.restore(runId, ctx.task.sessionId, input.environment, decision.snapshotId!, ctx.signal);
    if (ensured.kind === 'reconcile') return { type: 'fail', error: { code: 'restore_failed', message: ensured.reason } };
    const m = /^step:(\d+):/.exec(snap!.checkpoint);
    next.index = m ? Number(m[1]) + 1 : 0;
    next.generation = cp.generation + 1;
    return { type: 'next', phase: 'step', checkpoint: next as unknown as Json, writes: { documents: [{ documentId: sandboxDocId(runId), op: ensured.pointer as Json }] } };
  }
  // accept: whatever the sandbox holds now becomes the newest checkpoint's state.
  const ptr = await pointer(ctx, runId);
  const record = ptr.leaseId ? await ctx.store.getLease(ptr.leaseId) : undefined;
  const verified = record ? await sb.verifyRecord(record) : { ok: false as const, reason: 'no lease' };
  if (!verified.ok) return { type: 'fail', error: { code: 'accept_failed', message: `cannot accept: the sandbox is not usable (${verified.reason}); restore a snapshot instead` } };
  const lease = await sb.attachRecord(runId, record!, input.environment);
  const s = await sb.snapshot(runId, ctx.task.sessionId, input.environment, lease, `accept:${cp.pending?.index ?? cp.index}`, ptr.snapshotId, ctx.signal);
  if (cp.pending?.kind === 'interrupted') next.index = cp.pending.index + 1;
  next.generation = cp.generation + 1;
  return { type: 'next', phase: 'step', checkpoint: next as unknown as Json, writes: { snapshots: [s.record], documents: [{ documentId: sandboxDocId(runId), op: s.pointer as Json }] } };
}
