import { defineTask, storedValue, type TaskHandler, type TypedDecision } from '../kernel';
import { plainJson, type CommandEvidence, type Task } from '../model';
import { newId } from '../support';
import { BerthError, isBerthError } from '../errors';
import { sandboxDocId, SANDBOX_DOC, type RunSandbox } from '../run-sandbox';
import {
  PlanResultSchema,
  PlanRootCheckpointSchema,
  PlanRunInputSchema,
  StepInputSchema,
  StepTaskResultSchema,
  type PlanProgress,
  type PlanResult,
  type PlanRootCheckpoint,
  type PlanRunInput,
  type StepInput,
  type StepResult,
  type StepTaskResult,
} from './plan-input';
import { parkRun, reconciled, sandboxAdvice } from './reconcile-phase';
import { runStep } from './step-task';
import { settleCancelledStep, stopAbandonedStep } from './step-cancel';
import { prepareFork } from './fork-prepare';
import { ACCEPTANCE_STEP, runSteps } from './plan-schema';
import { stepEffectId } from './checkpoints';
import { checkArtifacts } from './artifact-phase';
import type { ArtifactStore } from '../artifacts';
import { pushWaitMs } from '../snapshot';
import { faultPoint } from '../support/faults';
import { pagesOf } from '../store';
import { collectIfGrown } from '../support/heap-bound';

export const PLAN_KIND = 'plan';
/** How long a step whose push waited in vain sleeps before it pushes again: a third of the push wait, 5 to 30 s. */
const registryRetryMs = () => Math.min(30_000, Math.max(5_000, Math.round(pushWaitMs() / 3)));

/** A step task's input and result, parsed: a stored shape that drifted is named, not read as `undefined`. */
const stepInputOf = (child: Task): StepInput => storedValue(StepInputSchema, child.input, { what: 'input', kind: STEP_KIND, taskId: child.id });
const isStep = (child: Task, index: number, generation: number) => {
  const i = stepInputOf(child);
  return i.index === index && i.generation === generation;
};
const stepOrder = (i: StepInput) => i.generation * 1e6 + i.index;
const stepTaskResultOf = (child: Task) => storedValue(StepTaskResultSchema.nullable(), child.result, { what: 'result', kind: STEP_KIND, taskId: child.id });
/** What the step said of the command an earlier host started for it, as a clause of the park reason. */
function earlierOf(child: Task): string {
  const r = child.result as { earlier?: unknown } | null;
  return typeof r?.earlier === 'string' ? ` (${r.earlier})` : '';
}

/** A finished step's result (null when it failed without one or was interrupted). */
const stepResultOf = (child: Task): StepResult | null => {
  const r = stepTaskResultOf(child);
  return r && 'exitCode' in r ? r : null;
};
export const STEP_KIND = 'plan-step';

/** A finished step as the root's completion keeps it: where it stands and what it reported. */
type DoneStep = StepInput & { result: StepTaskResult | null };
/** Children per read of the root's completion. */
const CHILD_PAGE = 500;
/**
 * The heap's slack while the completion reads its children (support/heap-bound.ts): ~20 MB of
 * rows for 3,000 steps, of which it keeps the results; at a run's 16 MB the end of a long run grew
 * its heap past anything its steps had needed (bench/RESULTS.md, session 19).
 */
const COMPLETION_SLACK_MB = 4;

/**
 * The two task kinds of a plan run: the root walks the steps; each step runs one command. Steps
 * that declare artifacts copy them into `artifacts` (without a store they fail saying so).
 */
export function planHandlers(sb: RunSandbox, progress: (p: PlanProgress) => void, artifacts?: ArtifactStore): TaskHandler[] {
  // Runs whose committed artifacts this process has checked against the store (once per resume).
  const verified = new Set<string>();
  const root = defineTask({
    kind: PLAN_KIND,
    version: 1,
    input: PlanRunInputSchema,
    checkpoint: PlanRootCheckpointSchema,
    result: PlanResultSchema,
    initialPhase: 'prepare',
    restartLimit: 10,
    // The plan (every step) is parsed once per run, not at each of its phases: two per step.
    cacheInput: true,
    phases: {
      prepare: async (ctx) => {
        const input = ctx.value;
        if (input.fork) return prepareFork(ctx, sb, progress);
        const runId = ctx.task.runId!;
        const uploaded = input.workspaceDir ? await sb.leaseUploaded(runId, ctx.task.sessionId, input.environment, input.workspaceDir, ctx.signal, (message) => progress({ type: 'sandbox', runId, message })) : undefined;
        if (uploaded) {
          // The workspace came in the lease's own image: that image is the upload snapshot.
          const { lease, upload: up } = uploaded;
          progress({ type: 'sandbox', runId, message: `leased ${lease.id} (container ${lease.containerId.slice(0, 12)})` });
          const skipped = up.skipped.length ? `; skipped ${up.skipped.length} special files (${up.skipped.map((s) => `${s.path}: ${s.kind}`).join(', ')})` : '';
          progress({ type: 'sandbox', runId, message: `uploaded ${up.files} files (${up.bytes} bytes) from ${input.workspaceDir} as a layer of the sandbox's image${skipped}` });
          const writes: NonNullable<TypedDecision<PlanRootCheckpoint, PlanResult>['writes']> = {
            documents: [{ documentId: sandboxDocId(runId), create: { type: SANDBOX_DOC } }, { documentId: sandboxDocId(runId), op: uploaded.pointer }],
            snapshots: [uploaded.record],
          };
          if (up.skipped.length) writes.entries = [{ kind: 'sandbox.upload', body: plainJson({ from: input.workspaceDir, files: up.files, bytes: up.bytes, skipped: up.skipped }) }];
          faultPoint('plan:uploaded');
          return { type: 'next', phase: 'step', checkpoint: { index: 0, generation: 0 }, writes };
        }
        const lease = await sb.leaseFresh(runId, ctx.task.sessionId, input.environment, ctx.signal);
        progress({ type: 'sandbox', runId, message: `leased ${lease.id} (container ${lease.containerId.slice(0, 12)})` });
        const writes: NonNullable<TypedDecision<PlanRootCheckpoint, PlanResult>['writes']> = { documents: [{ documentId: sandboxDocId(runId), create: { type: SANDBOX_DOC } }] };
        if (input.workspaceDir) {
          const up = await lease.uploadDir(input.workspaceDir, input.environment.workspace.path);
          const skipped = up.skipped.length ? `; skipped ${up.skipped.length} special files (${up.skipped.map((s) => `${s.path}: ${s.kind}`).join(', ')})` : '';
          progress({ type: 'sandbox', runId, message: `uploaded ${up.files} files (${up.bytes} bytes) from ${input.workspaceDir}${skipped}` });
          // On the run's record: FIFOs, sockets and devices cannot be uploaded, and the operator should know which were left out.
          if (up.skipped.length) writes.entries = [{ kind: 'sandbox.upload', body: plainJson({ from: input.workspaceDir, files: up.files, bytes: up.bytes, skipped: up.skipped }) }];
          faultPoint('plan:uploaded');
        }
        if (input.environment.snapshot.policy === 'never') {
          const digest = await sb.digest(lease, input.environment, ctx.signal);
          writes.documents!.push({ documentId: sandboxDocId(runId), op: { leaseId: lease.id, workspaceDigest: digest } });
        } else {
          // Nothing uploaded: the fresh sandbox is its image, and that image is the snapshot (no commit).
          const s = (input.workspaceDir ? undefined : await sb.freshImageSnapshot(runId, ctx.task.sessionId, input.environment, lease, 'upload', ctx.signal)) ?? (await sb.snapshot(runId, ctx.task.sessionId, input.environment, lease, 'upload', null, ctx.signal));
          writes.snapshots = [s.record];
          writes.documents!.push({ documentId: sandboxDocId(runId), op: s.pointer });
        }
        return { type: 'next', phase: 'step', checkpoint: { index: 0, generation: 0 }, writes };
      },
      step: async (ctx) => {
        const input = ctx.value;
        const cp = ctx.state;
        const redo = await checkArtifacts(ctx, sb, artifacts, verified, progress);
        if (redo) return redo;
        if (cp.index >= runSteps(input.plan).length) {
          // Released before the completion commits: a host killed right after it leaves no sandbox of a
          // finished run behind (sandbox_cleanup_visible), at ~60 ms of the run's fixed cost.
          await sb.finish(ctx.task.runId!);
          // In step order, then generation: not in creation-time order (see `stepped`). Read page by
          // page, each finished step kept as its place and parsed result only: holding every child
          // row at once was ~15 MB of a 3,000-step run's peak at its end (bench/RESULTS.md, session 16).
          const done: DoneStep[] = [];
          for await (const page of pagesOf((p) => ctx.children({ page: p }), CHILD_PAGE, () => collectIfGrown(COMPLETION_SLACK_MB))) {
            for (const c of page) if (c.status === 'terminal') done.push({ ...stepInputOf(c), result: stepTaskResultOf(c) });
          }
          done.sort((a, b) => stepOrder(a) - stepOrder(b));
          return { type: 'complete', result: { steps: done.map((d) => d.result) }, writes: { acceptance: commandAcceptance(ctx.task.runId!, input.plan, done) } };
        }
        const budgetMs = input.environment.resources.runBudgetS * 1000 - (cp.usedMs ?? 0);
        return { type: 'spawn', join: 'allSettled', phase: 'stepped', tasks: [{ kind: STEP_KIND, input: { index: cp.index, generation: cp.generation, budgetMs } satisfies StepInput }] };
      },
      stepped: async (ctx) => {
        const input = ctx.value;
        const cp = ctx.state;
        // The step task of this index and generation, by what it was spawned for: creation times
        // follow the wall clock, which can step backwards.
        // The step `step` just spawned is the newest child: one row read, not every step of the run.
        const child = (await ctx.children({ newest: 1 })).find((c) => isStep(c, cp.index, cp.generation)) ?? (await ctx.children()).find((c) => isStep(c, cp.index, cp.generation));
        if (!child) throw new BerthError('plan_corrupt', `plan task ${ctx.task.id} has no step task for step ${cp.index} (generation ${cp.generation})`, { ids: { taskId: ctx.task.id } });
        const step = runSteps(input.plan)[cp.index]!;
        const result = stepResultOf(child);
        const runId = ctx.task.runId!;
        // The reason says, before the operator decides, whether the sandbox can be kept or which snapshots can be restored.
        const park = async (kind: 'interrupted' | 'reconcile', reason: string): Promise<TypedDecision<PlanRootCheckpoint, PlanResult>> =>
          parkRun(cp, { kind, index: cp.index, reason: `${reason}; ${await sandboxAdvice(ctx, sb, runId)}` });
        if (child.outcome === 'interrupted') {
          const carried = ((await ctx.store.getEffect(stepEffectId(runId, cp.index, cp.generation)))?.intent as { carriedFrom?: string } | null)?.carriedFrom;
          const what = carried
            ? `step ${step.name} (replay never) may have run as ${carried} in run ${input.fork?.runId}, which this run was forked from while it was in flight; it is not started again`
            : `step ${step.name} (replay never) was in flight when it was interrupted; it may or may not have run${earlierOf(child)}`;
          return park('interrupted', `${what}: say so with --accept (it did) or --reject-effect (it did not)`);
        }
        if (result?.reconcile) return park('reconcile', `before step ${step.name}: ${result.reconcile}`);
        // Steps from `rewind` on run again on the restored sandbox, under new effect ids.
        const usedMs = (cp.usedMs ?? 0) + (result?.durationMs ?? 0);
        if (typeof result?.rewind === 'number') return { type: 'next', phase: 'step', checkpoint: { index: result.rewind, generation: cp.generation + 1, usedMs } };
        // Over the disk limit the sandbox cannot be snapshotted or trusted, and a run over its budget
        // may run nothing more: allowFailure does not go on.
        const stop = child.error?.code === 'disk_exceeded' || child.error?.code === 'run_budget_exceeded' ? child.error.code : undefined;
        if (child.outcome === 'error' && (!step.allowFailure || stop)) {
          await sb.finish(ctx.task.runId!);
          return { type: 'fail', error: { code: stop ?? 'step_failed', message: `step ${step.name} failed: ${child.error?.message ?? 'unknown'}` } };
        }
        return { type: 'next', phase: 'step', checkpoint: { index: cp.index + 1, generation: cp.generation, usedMs } };
      },
      reconciled: async (ctx) => reconciled(ctx, sb),
    },
  });

  const step = defineTask({
    kind: STEP_KIND,
    version: 1,
    input: StepInputSchema,
    result: StepTaskResultSchema,
    initialPhase: 'run',
    restartLimit: 10,
    // An engine restart can take a while; these retries back off to about 25 s in all.
    maxRetries: 8,
    phases: {
      // A registry that stayed down past the push wait never fails the step: it waits, visibly.
      run: async (ctx) =>
        runStep(ctx, sb, progress, artifacts).catch((err: unknown) => {
          if (!isBerthError(err, 'registry_push_waiting')) throw err;
          const until = ctx.now() + registryRetryMs();
          return { type: 'sleep' as const, until, phase: 'run', run: { to: 'retry_wait' as const, reason: `${err.message}; nothing is lost (a finished command is not run again), the push is tried again at ${new Date(until).toISOString()}` } };
        }),
    },
    // A cancel that finds the step left running by a dead host stops its command first.
    stopAbandoned: (task, d) => stopAbandonedStep(sb, task, d),
    settleOnCancel: settleCancelledStep,
  });
  return [root, step];
}

/**
 * The acceptance command's verdict, committed with the run's completion (so a completed run with
 * a command never shows `pending`): the newest generation's result of the acceptance step. One
 * per run (request id from the run id): a completion committed again records nothing new.
 */
function commandAcceptance(runId: string, plan: PlanRunInput['plan'], done: DoneStep[]) {
  if (typeof plan.acceptance !== 'object') return [];
  const index = plan.steps.length;
  const child = done.filter((c) => c.index === index).at(-1);
  const r = child?.result && 'exitCode' in child.result ? child.result : null;
  if (!child || !r) return [];
  const evidence: CommandEvidence = {
    command: plan.acceptance.command,
    exitCode: r.exitCode,
    timedOut: r.timedOut,
    outputDigest: r.outputDigest ?? '',
    effectId: stepEffectId(runId, index, child.generation),
  };
  const accepted = r.exitCode === 0 && !r.timedOut;
  const reason = accepted ? null : `${ACCEPTANCE_STEP} command ${r.timedOut ? 'timed out' : `exited ${r.exitCode}`}`;
  return [{ id: newId('acc'), requestId: `acceptance-command:${runId}`, decision: accepted ? ('accepted' as const) : ('rejected' as const), actor: 'acceptance-command', reason, evidence: plainJson(evidence) }];
}
