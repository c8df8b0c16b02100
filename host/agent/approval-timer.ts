import { z } from 'zod';
import { defineTask, storedValue, type TaskHandler, type TypedPhaseContext } from '../kernel';
import { plainJson, type Task } from '../model';
import type { AgentDeps } from './agent-deps';
import { ApprovalTimerInputSchema, ToolCallInputSchema, type ApprovalTimerInput } from './agent-input';
import { TOOL_KIND } from './agent-sandbox';
import type { ApprovalSignal } from './tool-task';
import { runResumeTransition } from './approval-run-state';

export const TIMER_KIND = 'agent-approval-timer';

/** True while the tool task still waits for its approval decision. */
export const awaitsApproval = (t: Task | undefined) => t?.status === 'waiting' && t.wait?.signal === 'approval';

async function sibling(ctx: TypedPhaseContext<ApprovalTimerInput>): Promise<Task | undefined> {
  const { toolCallId } = ctx.value;
  if (!ctx.task.parentId) return undefined;
  const tasks = await ctx.store.listTasks({ parentId: ctx.task.parentId });
  return tasks.find((t) => t.kind === TOOL_KIND && storedValue(ToolCallInputSchema, t.input, { what: 'input', kind: TOOL_KIND, taskId: t.id }).toolCallId === toolCallId);
}

/** Decided means the tool task left (or never needs) its wait: a decision is in its checkpoint, or it ended. */
const decided = (t: Task | undefined) => !t || t.status === 'terminal' || (t.checkpoint !== null && typeof t.checkpoint === 'object' && 'approval' in t.checkpoint);

/**
 * The durable expiry of one approval request: a sibling of the waiting tool task that sleeps
 * until the request expires, then delivers `expired` if no decision came first. An approve or
 * deny commit brings its wake time forward (same commit as the decision), so it ends at once and
 * never holds up the turn. Delivery is a compare-and-set on the waiting tool task, so a decision
 * and the expiry cannot both land, and an expiry is never turned into an approval.
 */
export function approvalTimerHandler(deps: AgentDeps): TaskHandler {
  return defineTask({
    kind: TIMER_KIND,
    version: 1,
    input: ApprovalTimerInputSchema,
    result: z.object({ expired: z.boolean() }),
    initialPhase: 'wait',
    phases: {
      wait: async (ctx) => {
        if (decided(await sibling(ctx))) return { type: 'complete', result: { expired: false } };
        return { type: 'sleep', until: ctx.value.expiresAt, phase: 'expire' };
      },
      expire: async (ctx) => {
        const { expiresAt } = ctx.value;
        const tool = await sibling(ctx);
        if (!awaitsApproval(tool)) return { type: 'complete', result: { expired: false } };
        if (ctx.now() < expiresAt) return { type: 'sleep', until: expiresAt, phase: 'expire' };
        const payload: ApprovalSignal = { decision: 'expired', digest: null, by: 'policy:approval-expiry', at: ctx.now() };
        const runTransitions = await runResumeTransition(ctx.store, tool!, 'approval expired', 'policy:approval-expiry');
        const delivered = await deps.kernel().deliver(tool!.id, 'approval', plainJson(payload), { runTransitions, actor: 'policy:approval-expiry' });
        return { type: 'complete', result: { expired: delivered } };
      },
    },
  });
}
