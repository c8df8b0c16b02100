import type { AnyTool } from '../../tools';
import { BerthError, isBerthError } from '../errors';
import { defineTask, type TaskHandler } from '../kernel';
import { plainJson, type Json, type Task } from '../model';
import type { NewEntry, Store } from '../store';
import { newId } from '../support/ids';
import { awaitsApproval } from './approval-timer';
import { runInputOf, toolsOf, type AgentDeps } from './agent-deps';
import { ToolCallInputSchema, type AgentRunInput, type ToolCallInput } from './agent-input';
import { TOOL_KIND } from './agent-sandbox';
import { approvalDigest, approvalId } from './approval-digest';
import { ENTRY, type ApprovalDecidedEntry, type ApprovalRequestedEntry } from './entries';
import { checkToolCall } from './tool-call-check';
import { z } from 'zod';
import { ApprovalRequestSchema, toolState, ToolCheckpointSchema, type ApprovalRequest, type ToolContext, type ToolDecision } from './tool-checkpoint';
import { toolIntent } from './tool-intent';
import { executePhase } from './tool-execute';
import { finishWithout, ToolTaskResultSchema, type ToolTaskResult } from './tool-result';
import { callBudgetLeft, CommandBudget } from './run-budget';
import { useTool } from './tool-use';
import { settleCancelledCall } from './tool-cancel';

export type { ApprovalRequest, ApprovalSignal } from './tool-checkpoint';

type EntryWrites = NonNullable<NonNullable<ToolDecision['writes']>['entries']>;

/**
 * The tool task: `call` checks the call and commits its intent (fixed arguments, effect id,
 * replay policy), or first waits for an approval (`decided`); `execute` runs it once under
 * its effect record and commits the result entry, the receipt and the terminal state together.
 */
export function toolHandler(deps: AgentDeps): TaskHandler {
  return defineTask({
    kind: TOOL_KIND,
    version: 1,
    input: ToolCallInputSchema,
    checkpoint: ToolCheckpointSchema,
    result: ToolTaskResultSchema,
    initialPhase: 'call',
    restartLimit: 10,
    cancelEntries: closeApprovalOnCancel,
    settleOnCancel: settleCancelledCall(deps),
    // A call whose action was in flight when its host died: its command may still run in the
    // session's sandbox, and must be stopped before the cancel records where the call stopped.
    stopAbandoned: async (task) => {
      const effectId = (task.checkpoint as { effectId?: unknown } | null)?.effectId;
      if (typeof effectId !== 'string' || (await deps.store.getEffect(effectId))?.status !== 'executing') return;
      await deps.sandbox.stopAbandoned(task, await runInputOf(deps.store, task));
    },
    phases: {
      call: (ctx) => deps.sandbox.order.during(ctx.task.id, async () => {
        const call = ctx.value;
        const input = await runInputOf(deps.store, ctx.task);
        const checked = checkToolCall(toolsOf(deps, input), call.name, call.arguments);
        if (!checked.ok) return finishWithout(call, 'invalid', checked.content);
        if (call.approvalExpiresAt !== null) return askApproval(ctx, call, checked.args);
        return intend(deps, ctx, input, call, checked.tool, checked.args, []);
      }),
      decided: (ctx) => deps.sandbox.order.during(ctx.task.id, async () => {
        const call = ctx.value;
        const input = await runInputOf(deps.store, ctx.task);
        const { request, approval } = toolState(ctx, 'request');
        if (!approval) throw new BerthError('checkpoint_invalid', `${TOOL_KIND} checkpoint in phase decided: approval: missing`, { ids: { taskId: ctx.task.id } });
        const late = approval.decision === 'approve' && approval.at > request.expiresAt;
        const mismatch = approval.decision === 'approve' && approval.digest !== request.digest;
        const outcome: ApprovalDecidedEntry['decision'] = approval.decision === 'expired' || late ? 'expired' : approval.decision === 'approve' && !mismatch ? 'approved' : 'denied';
        const record: ApprovalDecidedEntry = { approvalId: request.id, toolCallId: call.toolCallId, decision: outcome, by: approval.by, digest: request.digest };
        const entries: EntryWrites = [{ kind: ENTRY.approvalDecided, body: plainJson(record) }];
        if (outcome === 'expired') {
          return finishWithout(call, 'expired', `error: the approval request for this call expired at ${new Date(request.expiresAt).toISOString()} without a decision. The call did not run.`, entries);
        }
        if (outcome === 'denied') {
          const why = mismatch ? `the approval given was for a different call (digest ${approval.digest})` : `${approval.by} denied it`;
          return finishWithout(call, 'denied', `error: this call was not approved: ${why}. It did not run.`, entries);
        }
        const checked = checkToolCall(toolsOf(deps, input), call.name, call.arguments);
        if (!checked.ok) return finishWithout(call, 'invalid', checked.content, entries);
        return intend(deps, ctx, input, call, checked.tool, checked.args, entries);
      }),
      execute: (ctx) => deps.sandbox.order.during(ctx.task.id, () => executePhase(deps, ctx)),
    },
  });
}

function askApproval(ctx: ToolContext, call: ToolCallInput, args: unknown): ToolDecision {
  const request: ApprovalRequest = { id: approvalId(ctx.task.runId!, call.toolCallId), digest: approvalDigest(call.name, args), expiresAt: call.approvalExpiresAt! };
  const record: ApprovalRequestedEntry = { approvalId: request.id, toolCallId: call.toolCallId, tool: call.name, arguments: plainJson(args), digest: request.digest, expiresAt: request.expiresAt };
  return {
    type: 'await',
    signal: 'approval',
    phase: 'decided',
    checkpoint: { request },
    run: { to: 'awaiting_approval', reason: `call ${call.toolCallId} (${call.name}) awaits approval ${request.id} (digest ${request.digest})` },
    writes: { entries: [{ kind: ENTRY.approvalRequested, body: plainJson(record) }] },
  };
}

/** Commits the intent and moves to `execute`; a tool with a plan fixes its expected result first. */
async function intend(deps: AgentDeps, ctx: ToolContext, input: AgentRunInput, call: ToolCallInput, tool: AnyTool, args: unknown, entries: EntryWrites): Promise<ToolDecision> {
  let plan: Json = null;
  let intended = 0;
  const writes: NonNullable<ToolDecision['writes']> = { entries };
  if (tool.plan) {
    // The plan reads the sandbox as the calls before this one in the turn left it.
    await deps.sandbox.order.turn(ctx, call);
    let planMs = 0;
    let stop: ToolTaskResult['budget'];
    const planned = await deps.sandbox.exclusive(ctx.task.sessionId, async () => {
      const acq = await deps.sandbox.ensure(ctx, input);
      if (acq.kind === 'reconcile') return { ok: false as const, output: { content: `error: the sandbox cannot be used (${acq.reason}); the call did not run`, isError: true } };
      Object.assign(writes, { documents: acq.writes.documents });
      if (acq.writes.entries) writes.entries = [...(acq.writes.entries ?? []), ...(writes.entries ?? [])];
      // The plan's commands are the call's too: held to what is left of the run's budget, and counted (run-budget.ts).
      const budget = new CommandBudget(await callBudgetLeft(ctx, deps.sandbox.order, input, call), input.environment);
      try {
        budget.assertLeft();
        const p = await useTool(deps, ctx, input, call, acq.lease, (tctx) => tool.plan!(tctx, args), budget);
        if (!budget.stopped) return p;
        stop = 'stopped';
        return { ok: false as const, output: { content: `${budget.stoppedText()} It was this call's plan: the call did not run.`, isError: true } };
      } catch (err) {
        if (isBerthError(err, 'run_budget_exceeded')) {
          stop = 'refused';
          return { ok: false as const, output: { content: `error: ${err.message}`, isError: true } };
        }
        if (!isBerthError(err, 'secret_unavailable')) throw err;
        return { ok: false as const, output: { content: `error: ${err.message}; the call did not run`, isError: true } };
      } finally {
        planMs = budget.usedMs;
      }
    });
    // What the acquisition wrote (a sandbox.verified, a moved pointer) commits with the refusal too.
    if (!planned.ok) {
      const refused = finishWithout(call, 'error', planned.output.content, writes.entries);
      if (writes.documents) refused.writes = { ...refused.writes, documents: writes.documents };
      if (refused.type === 'complete' && refused.result) Object.assign(refused.result, { ...(planMs > 0 ? { commandMs: planMs } : {}), ...(stop ? { budget: stop } : {}) });
      return refused;
    }
    plan = planned.plan;
    intended = planMs;
  }
  const { checkpoint, effect } = toolIntent(ctx.task.runId, ctx.task.id, call, tool, args, plan, intended);
  writes.effects = [effect];
  return { type: 'next', phase: 'execute', checkpoint, writes };
}

/**
 * A call cancelled while it waits for its approval closes the request in the same commit:
 * `cancelled`, by whoever cancelled the run, so the record never shows an open approval on a run
 * that can no longer take one.
 */
async function closeApprovalOnCancel(task: Task, d: { store: Store }): Promise<NewEntry[]> {
  if (!awaitsApproval(task)) return [];
  const open = z.object({ request: ApprovalRequestSchema }).safeParse(task.checkpoint);
  if (!open.success) return [];
  const { request } = open.data;
  const call = ToolCallInputSchema.parse(task.input);
  const last = task.runId ? (await d.store.listRunTransitions(task.runId)).findLast((t) => t.to === 'cancelling') : undefined;
  const record: ApprovalDecidedEntry = { approvalId: request.id, toolCallId: call.toolCallId, decision: 'cancelled', by: last?.actor ?? 'policy:task-cancelled', digest: request.digest };
  return [{ id: newId('ent'), conversationId: null, runId: task.runId, taskId: task.id, kind: ENTRY.approvalDecided, body: plainJson(record) }];
}
