import { judge } from '../../api/decisions';
import { operator } from '../../api/runtime';
import type { CliContext } from '../context';
import { emit } from '../output';

/**
 * `berth accept RUN` / `berth reject RUN --reason …`: the operator's judgement of a completed run,
 * committed (it needs no ownership of the run; it never changes the run state). `--request-id` makes a
 * retried command the same decision.
 */
export async function judgeRun(ctx: CliContext, runId: string, decision: 'accepted' | 'rejected', o: { reason?: string; requestId?: string }): Promise<number> {
  // Without --request-id, the same command run again is the decision already in force, not a new one.
  const r = await judge(ctx.store, runId, decision, operator(), { ...o, once: 'repeat' });
  emit(ctx.json, { runId, decision: r.decision, repeated: r.repeated, acceptance: r.acceptance }, () => r.line);
  return 0;
}

export { judge, acceptanceLine } from '../../api/decisions';
