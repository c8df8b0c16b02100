import { userInfo } from 'node:os';
import { acceptanceOf, decideAcceptance, type AcceptanceView } from '../../acceptance';
import { BerthError } from '../../errors';
import type { Store } from '../../store';
import { newId } from '../../support';
import type { CliContext } from '../context';
import { emit } from '../output';
import { getRunOrThrow } from './runs';

const operator = () => `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;

/**
 * `berth accept RUN` / `berth reject RUN --reason …`: the operator's judgement of a completed run,
 * committed (it needs no ownership of the run; it never changes the run state). `--request-id` makes a
 * retried command the same decision.
 */
export async function judgeRun(ctx: CliContext, runId: string, decision: 'accepted' | 'rejected', o: { reason?: string; requestId?: string }): Promise<number> {
  const r = await judge(ctx.store, runId, decision, operator(), o);
  emit(ctx.json, { runId, decision: r.decision, repeated: r.repeated, acceptance: r.acceptance }, () => r.line);
  return 0;
}

/**
 * The one code path of a judgement, shared by `berth accept/reject` and the web view's buttons:
 * checks the reason, commits the decision as `actor`, and reads the acceptance it leaves.
 */
export async function judge(store: Store, runId: string, decision: 'accepted' | 'rejected', actor: string, o: { reason?: string; requestId?: string }) {
  if (decision === 'rejected' && !o.reason?.trim()) throw new BerthError('usage', 'berth reject RUN needs --reason "why the outcome is not acceptable"');
  await getRunOrThrow(store, runId);
  const { decision: d, repeated } = await decideAcceptance(store, {
    runId,
    decision,
    actor,
    reason: o.reason?.trim() || null,
    requestId: o.requestId ?? newId('req'),
  });
  const acceptance: AcceptanceView = await acceptanceOf(store, await getRunOrThrow(store, runId));
  const line = `${repeated ? 'already recorded: ' : ''}${d.decision} run ${runId} as ${d.actor}${d.reason ? ` (${d.reason})` : ''}; acceptance is now ${acceptanceLine(acceptance)}`;
  return { decision: d, repeated, acceptance, line };
}

/** `accepted by user:ann at … (reason)`, `pending (berth accept RUN / berth reject RUN --reason …)`. */
export function acceptanceLine(a: AcceptanceView, runId?: string): string {
  if (a.state === 'none') return 'none (the run is not completed)';
  if (a.state === 'pending') return `pending${runId ? ` (berth accept ${runId} / berth reject ${runId} --reason …)` : ''}`;
  const ev = a.evidence as { exitCode?: number; outputDigest?: string } | null;
  const evidence = ev && typeof ev.exitCode === 'number' ? `; command exit ${ev.exitCode}, output ${ev.outputDigest ?? '?'}` : '';
  return `${a.state} by ${a.actor} at ${new Date(a.at!).toISOString()}${a.reason ? ` (${a.reason})` : ''}${evidence}`;
}
