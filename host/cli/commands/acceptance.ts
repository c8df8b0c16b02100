import { userInfo } from 'node:os';
import { acceptanceOf, decideAcceptance, type AcceptanceView } from '../../acceptance';
import { BerthError } from '../../errors';
import { newId } from '../../support';
import type { CliContext } from '../context';
import { emit } from '../output';
import { getRunOrThrow } from './runs';

const operator = () => `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;

/**
 * `berth accept RUN` / `berth reject RUN --reason …`: the operator's judgement of a completed run,
 * committed (no execution right needed; it never changes the run state). `--request-id` makes a
 * retried command the same decision.
 */
export async function judgeRun(ctx: CliContext, runId: string, decision: 'accepted' | 'rejected', o: { reason?: string; requestId?: string }): Promise<number> {
  if (decision === 'rejected' && !o.reason?.trim()) throw new BerthError('usage', 'berth reject RUN needs --reason "why the outcome is not acceptable"');
  await getRunOrThrow(ctx.store, runId);
  const { decision: d, repeated } = await decideAcceptance(ctx.store, {
    runId,
    decision,
    actor: operator(),
    reason: o.reason?.trim() || null,
    requestId: o.requestId ?? newId('req'),
  });
  const view = await acceptanceOf(ctx.store, (await getRunOrThrow(ctx.store, runId))!);
  emit(ctx.json, { runId, decision: d, repeated, acceptance: view }, () =>
    `${repeated ? 'already recorded: ' : ''}${d.decision} run ${runId} as ${d.actor}${d.reason ? ` (${d.reason})` : ''}; acceptance is now ${acceptanceLine(view)}`,
  );
  return 0;
}

/** `accepted by user:ann at … (reason)`, `pending (berth accept RUN / berth reject RUN --reason …)`. */
export function acceptanceLine(a: AcceptanceView, runId?: string): string {
  if (a.state === 'none') return 'none (the run is not completed)';
  if (a.state === 'pending') return `pending${runId ? ` (berth accept ${runId} / berth reject ${runId} --reason …)` : ''}`;
  const ev = a.evidence as { exitCode?: number; outputDigest?: string } | null;
  const evidence = ev && typeof ev.exitCode === 'number' ? `; command exit ${ev.exitCode}, output ${ev.outputDigest ?? '?'}` : '';
  return `${a.state} by ${a.actor} at ${new Date(a.at!).toISOString()}${a.reason ? ` (${a.reason})` : ''}${evidence}`;
}
