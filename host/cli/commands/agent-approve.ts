import { userInfo } from 'node:os';
import { decideApproval } from '../../agent';
import type { CliContext } from '../context';
import { emit } from '../output';
import { getRunOrThrow } from './runs';
import { readHost } from './run-driver';

const operator = () => `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;

/**
 * `berth approve RUN ID [--digest D]` and `berth deny RUN ID`: commits the decision (ID is the tool
 * call id or the approval id). The host driving the run continues it; without one, `berth resume RUN`.
 */
export async function decide(ctx: CliContext, runId: string, id: string, decision: 'approve' | 'deny', digest?: string): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const view = await decideApproval(ctx.store, { runId, id, decision, digest, actor: operator(), now: ctx.clock.now() });
  // The decision is committed without owning the run: a live owner keeps driving it.
  const host = await readHost(ctx.store, ctx.clock.now(), ctx.hostId, run.sessionId);
  emit(ctx.json, { runId, approval: view, owner: host }, () =>
    `${view.state} ${view.tool} call ${view.toolCallId} (approval ${view.approvalId}, digest ${view.digest}) as ${view.by}\n` +
    (host?.live ? `host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} drives ${runId} and continues it now` : `no live host drives ${runId}: continue it with berth resume ${runId}`),
  );
  return 0;
}
