import { decideCall } from '../../api/decisions';
import { operator } from '../../api/runtime';
import type { CliContext } from '../context';
import { emit } from '../output';

/**
 * `berth approve RUN ID [--digest D]` and `berth deny RUN ID`: commits the decision (ID is the tool
 * call id or the approval id). The host driving the run continues it; without one, `berth resume RUN`.
 */
export async function decide(ctx: CliContext, runId: string, id: string, decision: 'approve' | 'deny', digest?: string): Promise<number> {
  // The decision is committed without owning the run: a live owner keeps driving it.
  const { approval: view, owner: host } = await decideCall(ctx, runId, id, decision, operator(), digest);
  emit(ctx.json, { runId, approval: view, owner: host }, () =>
    `${view.state} ${view.tool} call ${view.toolCallId} (approval ${view.approvalId}, digest ${view.digest}) as ${view.by}\n` +
    (host?.live ? `host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} drives ${runId} and continues it now` : `no live host drives ${runId}: continue it with berth resume ${runId}`),
  );
  return 0;
}
