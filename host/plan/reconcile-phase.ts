import type { PhaseContext, TypedDecision, TypedPhaseContext } from '../kernel';
import type { Json } from '../model';
import { sandboxDocId, type RunSandbox } from '../run-sandbox';
import type { PlanResult, PlanRootCheckpoint, PlanRunInput } from './plan-input';

/** What the plan task's phases see and decide. */
export type PlanContext = TypedPhaseContext<PlanRunInput, PlanRootCheckpoint>;
export type PlanDecision = TypedDecision<PlanRootCheckpoint, PlanResult>;
import { ARTIFACTS_WAIVED, nextIndexOf, stepEffectId } from './checkpoints';
import { readPointer } from './step-task';

/**
 * What the operator can do about the sandbox, said before they decide: keep it when it is usable,
 * otherwise restore one of the snapshots listed.
 */
export async function sandboxAdvice(ctx: PhaseContext, sb: RunSandbox, runId: string): Promise<string> {
  const ptr = await readPointer(ctx, runId);
  const usable = await sb.usable(ptr).catch((err: unknown) => ({ ok: false as const, reason: `it could not be checked: ${err instanceof Error ? err.message : String(err)}` }));
  if (usable.ok) return 'the sandbox is usable: --accept continues in it';
  const snaps = await sb.restorable(runId);
  const list = snaps.length ? snaps.map((s) => `${s.id} (${s.checkpoint})`).join(', ') : 'none';
  return `the sandbox is not usable (${usable.reason}): continue from a snapshot with --restore SNAPSHOT (restorable: ${list})`;
}

/** Waits for the operator (again), the run in `needs_reconciliation` with `reason`. */
export function parkRun(cp: PlanRootCheckpoint, pending: NonNullable<PlanRootCheckpoint['pending']>): PlanDecision {
  return {
    type: 'await',
    signal: 'reconcile',
    phase: 'reconciled',
    checkpoint: { ...cp, reconcile: undefined, pending },
    run: { to: 'needs_reconciliation', reason: pending.reason },
  };
}

/**
 * Carries out the operator's decision, then continues the steps. The uncertain effects were
 * settled by the commit that delivered it; what is left is the sandbox: the snapshot named, or the
 * current sandbox. A step whose effect is confirmed is continued after, never executed again. A
 * decision that cannot be carried out (sandbox gone, snapshot image missing) parks the run again
 * with the reason and what can be restored; it never fails the run.
 */
export async function reconciled(ctx: PlanContext, sb: RunSandbox): Promise<PlanDecision> {
  const input = ctx.value;
  const cp = ctx.state;
  const runId = ctx.task.runId!;
  const decision = cp.reconcile ?? {};
  const pending = cp.pending ?? { kind: 'reconcile' as const, index: cp.index, reason: '' };
  const again = async (why: string) => parkRun(cp, { ...pending, reason: `${why}; ${await sandboxAdvice(ctx, sb, runId)}` });
  const next: PlanRootCheckpoint = { index: cp.index, generation: cp.generation + 1, ...(cp.usedMs !== undefined ? { usedMs: cp.usedMs } : {}) };
  // The operator decided with the missing artifacts named: they are not checked again.
  const waived = pending.artifacts?.length ? [{ kind: ARTIFACTS_WAIVED, body: { artifacts: pending.artifacts } }] : [];
  const snapshotId = decision.snapshotId ?? null;
  if (snapshotId) {
    const snap = await ctx.store.getSnapshot(snapshotId);
    if (!snap) return again(`snapshot ${snapshotId} is not in the store`);
    const ensured = await sb.restore(runId, ctx.task.sessionId, input.environment, snapshotId, ctx.signal);
    if (ensured.kind === 'reconcile') return again(`restoring ${snapshotId} failed: ${ensured.reason}`);
    next.index = nextIndexOf(snap.checkpoint);
    return { type: 'next', phase: 'step', checkpoint: next, writes: { documents: [{ documentId: sandboxDocId(runId), op: ensured.pointer as Json }], entries: waived } };
  }
  // Keep the sandbox: whatever it holds now becomes the newest checkpoint's state.
  const ptr = await readPointer(ctx, runId);
  const usable = await sb.usable(ptr);
  if (!usable.ok) return again(`cannot continue in the current sandbox: ${usable.reason}`);
  const lease = await sb.attachRecord(runId, usable.record, input.environment);
  const effect = await ctx.store.getEffect(stepEffectId(runId, pending.index, cp.generation));
  next.index = effect?.status === 'confirmed' ? pending.index + 1 : pending.index;
  const s = await sb.snapshot(runId, ctx.task.sessionId, input.environment, lease, `reconciled:${next.index}`, ptr.snapshotId, ctx.signal);
  return { type: 'next', phase: 'step', checkpoint: next, writes: { snapshots: [s.record], documents: [{ documentId: sandboxDocId(runId), op: s.pointer as Json }], entries: waived } };
}
