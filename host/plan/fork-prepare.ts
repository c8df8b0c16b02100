import type { Json } from '../model';
import { sandboxDocId, SANDBOX_DOC, type RunSandbox } from '../run-sandbox';
import type { PlanProgress } from './plan-input';
import { parkRun, type PlanContext, type PlanDecision } from './reconcile-phase';

/**
 * The first phase of a fork: no upload and no fresh sandbox, but a lease from the snapshot of the
 * checkpoint it was forked at, verified against that snapshot's workspace digest before any step
 * runs. The steps before the fork point are the parent's history: the fork starts at the next one.
 * A snapshot that cannot be restored (pruned since the fork was submitted, digest mismatch) parks
 * the fork for the operator rather than starting from anything else.
 */
export async function prepareFork(ctx: PlanContext, sb: RunSandbox, progress: (p: PlanProgress) => void): Promise<PlanDecision> {
  const input = ctx.value;
  const fork = input.fork!;
  const runId = ctx.task.runId!;
  const cp = { index: fork.index, generation: 0 };
  const create = { documentId: sandboxDocId(runId), create: { type: SANDBOX_DOC } };
  const ensured = await sb.restore(runId, ctx.task.sessionId, input.environment, fork.snapshotId, ctx.signal);
  if (ensured.kind !== 'ok') {
    const reason = `fork of run ${fork.runId} at ${fork.checkpoint}: ${ensured.reason}; restore another snapshot with --restore SNAPSHOT or end it with --fail`;
    return { ...parkRun(cp, { kind: 'reconcile', index: fork.index, reason }), writes: { documents: [create] } };
  }
  progress({ type: 'sandbox', runId, message: `forked from run ${fork.runId} at ${fork.checkpoint}: leased ${ensured.lease.id} from snapshot ${fork.snapshotId}, workspace digest verified` });
  return { type: 'next', phase: 'step', checkpoint: cp, writes: { documents: [create, { documentId: sandboxDocId(runId), op: ensured.pointer as Json }] } };
}
