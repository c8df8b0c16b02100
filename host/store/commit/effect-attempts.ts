import type { AttemptOutcome, EffectAttempt, EffectStatus, Json, SettledBy } from '../../model';
import type { EffectWrite } from '../commit-input';

/** The effect row as the commit found it (after a create in the same write). */
export interface EffectBefore {
  status: EffectStatus;
  attempts: number;
  runId: string | null;
  taskId: string | null;
  log: EffectAttempt[];
}

const OUTCOME: Partial<Record<EffectStatus, AttemptOutcome>> = { confirmed: 'applied', failed: 'not_applied', intended: 'not_applied', unknown: 'unknown' };

/** A receipt typed as an operator's decision (host/kernel/operator-receipt.ts), read without importing the kernel. */
function operatorOf(receipt: Json | undefined): { by: string; decision: string } | null {
  if (receipt === null || typeof receipt !== 'object' || Array.isArray(receipt) || receipt.type !== 'operator-decision') return null;
  return typeof receipt.by === 'string' && typeof receipt.decision === 'string' ? { by: receipt.by, decision: receipt.decision } : null;
}

/**
 * The attempt log after one effect write, or null when the write changes no attempt. A move to
 * `executing` that counts an attempt begins one (by the effect's owner after the write, under
 * the commit's epoch); a move out of it (or out of `unknown`) ends the newest open attempt with
 * its outcome, its error, and how that was learnt: what the write says (`settle`), else an
 * operator's typed receipt, else the action's own reply. A settlement with no attempt to settle
 * (an effect written before attempts were kept) is kept as an attempt with no start.
 */
export function nextAttemptLog(before: EffectBefore, w: EffectWrite, at: number, epoch: number | null, actor: string): EffectAttempt[] | null {
  const set = w.set;
  if (!set?.status) return null;
  const owner = set.owner ?? { runId: before.runId, taskId: before.taskId };
  if (set.status === 'executing') {
    if (before.status === 'executing' && set.attempts === undefined) return null;
    const n = set.attempts ?? before.attempts + 1;
    // A safe action repeated after a crash: nobody learnt what the attempt left in flight did.
    const last = before.log.at(-1);
    const earlier = last?.outcome === 'in_flight' ? [...before.log.slice(0, -1), { ...last, outcome: 'unknown' as const, endedAt: at }] : before.log;
    const begun: EffectAttempt = {
      id: `${w.id}#${n}`, n, runId: owner.runId, taskId: owner.taskId, epoch, startedAt: at, endedAt: null,
      outcome: 'in_flight', settledBy: null, settledAt: null, actor: null, error: null,
    };
    return [...earlier, begun];
  }
  const outcome = OUTCOME[set.status];
  if (!outcome) return null;
  const last = before.log.at(-1);
  const open = last && (last.outcome === 'in_flight' || last.outcome === 'unknown') ? last : undefined;
  // Only a change of what is known is an attempt's business (an unknown effect adopted by another run stays unknown).
  if (!open && before.status !== 'executing' && before.status !== 'unknown') return null;
  if (open && open.outcome === outcome && set.error === undefined) return null;
  const op = operatorOf(set.receipt);
  const how: SettledBy | null =
    outcome === 'unknown' ? null : w.settle?.by ?? (op ? (op.decision === 'restore' ? 'restore' : 'operator') : 'reply');
  const who = outcome === 'unknown' ? null : w.settle?.actor ?? op?.by ?? (how === 'operator' || how === 'restore' ? actor : null);
  const error = set.error !== undefined && set.error !== null ? set.error : open?.error ?? null;
  const settled: EffectAttempt = {
    ...(open ?? {
      id: `${w.id}#${Math.max(before.attempts, 1)}`, n: Math.max(before.attempts, 1), runId: owner.runId, taskId: owner.taskId, epoch,
      startedAt: null, endedAt: null, outcome, settledBy: null, settledAt: null, actor: null, error: null,
    }),
    endedAt: open?.endedAt ?? at,
    outcome,
    settledBy: how,
    settledAt: how ? at : null,
    actor: who,
    error,
  };
  return open ? [...before.log.slice(0, -1), settled] : [...before.log, settled];
}
