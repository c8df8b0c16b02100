import { BerthError, isBerthError } from '../errors';
import { deliveryOf, withDelivery } from '../kernel';
import { resolveFlag, type ToolOutput } from '../../tools';
import type { PerformOutcome } from '../kernel';
import { plainJson, type Json, type ReplayPolicy } from '../model';
import { runInputOf, type AgentDeps } from './agent-deps';
import { toolState, type ExecuteCheckpoint, type ToolContext, type ToolDecision } from './tool-checkpoint';
import type { ToolResultStatus } from './entries';
import { resultEntry, type ToolTaskResult } from './tool-result';
import { useTool } from './tool-use';
import { callBudgetLeft, CommandBudget, refusedUntouched } from './run-budget';

export type { ExecuteCheckpoint } from './tool-checkpoint';

/** A tool's answer as its receipt keeps it: with what its commands took of the run's budget (run-budget.ts). */
type RanOutput = ToolOutput & { commandMs?: number; budget?: 'stopped' };

const interruptedText = (policy: ReplayPolicy, why = 'the host stopped while this call was running') =>
  `error: ${why}, so it may or may not have taken effect. ` +
  `Its replay policy (${policy}) does not allow repeating it automatically. Check the sandbox (e.g. the files it would change) before running it again.`;

/**
 * The result of a call whose tool threw. A secret that cannot be read stops a use before anything
 * runs: a first attempt did not run; a check of an earlier attempt (verify) could not be made, so
 * that attempt stays uncertain.
 */
function failure(err: unknown, verifying: boolean): { status: ToolResultStatus; out: ToolOutput } {
  // The run's budget was used up before this call's command (run-budget.ts): it did not run.
  if (isBerthError(err, 'run_budget_exceeded')) return { status: 'error', out: { content: `error: ${err.message}`, isError: true, detail: { code: err.code } } };
  if (isBerthError(err, 'secret_unavailable')) {
    if (verifying) return { status: 'interrupted', out: { content: `error: ${err.message}. ${interruptedText('verify')}`, isError: true, detail: { code: err.code } } };
    return { status: 'error', out: { content: `error: ${err.message}; the call did not run`, isError: true, detail: { code: err.code } } };
  }
  // Only a failure that proves the call was not applied reaches here (perform reports any other as uncertain).
  const msg = isBerthError(err) ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
  const ran = deliveryOf(err) === 'unknown' ? '' : '; the call did not take effect';
  return { status: 'error', out: { content: `error: the tool failed: ${msg}${ran}`, isError: true } };
}

/** The arguments the call's intent committed: in its effect record (or, from an older host, in the checkpoint). */
async function committedArgs(ctx: ToolContext, cp: ExecuteCheckpoint): Promise<Json> {
  if (cp.args !== undefined) return cp.args;
  const effect = await ctx.store.getEffect(cp.effectId);
  const args = (effect?.intent as { args?: Json } | null | undefined)?.args;
  if (args === undefined) throw new BerthError('checkpoint_invalid', `tool task ${ctx.task.id}: effect ${cp.effectId}, named by its checkpoint, ${effect ? 'holds no arguments' : 'is not in the store'}`, { ids: { taskId: ctx.task.id, effectId: cp.effectId } });
  return args;
}

/**
 * Runs the call once under its effect record, with the session's sandbox to itself. On recovery
 * `perform` decides: a confirmed receipt is reused, a `safe` call (safe then and now) runs again,
 * a `verify` tool is asked whether the original call took effect, anything else is uncertain and
 * the model is told so. A mutating call's resulting sandbox state commits with its result.
 */
export async function executePhase(deps: AgentDeps, ctx: ToolContext): Promise<ToolDecision> {
  const call = ctx.value;
  const cp = toolState(ctx, 'effectId');
  const input = await runInputOf(deps.store, ctx.task);
  const tool = deps.tools.get(call.name);
  if (!tool) {
    const text = `error: tool ${call.name} is not available in this host any more; the call did not run`;
    return { type: 'interrupt', reason: text, result: { toolCallId: call.toolCallId, status: 'error' }, writes: { entries: [resultEntry(call, 'error', text, true)] } };
  }
  const args = await committedArgs(ctx, cp);
  const policyNow = resolveFlag(tool.replay, args);
  const mutates = tool.snapshots === true || resolveFlag(tool.mutates, args);
  // After the calls before this one in the turn (call-order.ts).
  await deps.sandbox.order.turn(ctx, call);
  return deps.sandbox.exclusive(ctx.task.sessionId, async (): Promise<ToolDecision> => {
    const acq = await deps.sandbox.ensure(ctx, input);
    if (acq.kind === 'reconcile') {
      const text = `error: the sandbox cannot be used (${acq.reason}); the call did not run`;
      return { type: 'interrupt', reason: acq.reason, result: { toolCallId: call.toolCallId, status: 'error' }, writes: { entries: [resultEntry(call, 'error', text, true)] } };
    }
    let verifying = false;
    // What is left of the run's resources.runBudgetS for this call's commands, read with the sandbox held; its plan's commands (in `call`) count too.
    const budget = new CommandBudget(await callBudgetLeft(ctx, deps.sandbox.order, input, call), input.environment, cp.planMs ?? 0);
    const use = <T>(fn: Parameters<typeof useTool<T>>[5], b?: CommandBudget) => useTool(deps, ctx, input, call, acq.lease, fn, b);
    const spec = {
      id: cp.effectId,
      kind: `tool.${call.name}`,
      intent: plainJson({ tool: call.name, args, plan: cp.plan }),
      replay: policyNow,
      verify: tool.verify
        ? async () => {
            verifying = true;
            // Settling what an earlier attempt did: its commands count, but are not cut (run-budget.ts).
            budget.settling = true;
            const v = await use((tctx) => tool.verify!(tctx, args, cp.plan), budget).finally(() => (budget.settling = false));
            verifying = false;
            return v.done ? { done: true as const, receipt: plainJson(v.output) } : { done: false as const };
          }
        : undefined,
    };
    let status: ToolResultStatus;
    let out: ToolOutput;
    const result: ToolTaskResult = { toolCallId: call.toolCallId, status: 'ok' };
    let decision: 'complete' | 'interrupt' = 'complete';
    let untouched = false;
    try {
      const r: PerformOutcome<Json> = await ctx.perform(spec, async () => {
        try {
          // Spent: no call acts any more, with a command or without (run-budget.ts).
          budget.assertLeft();
          const output: RanOutput = await use((tctx) => tool.run(tctx, args, cp.plan), budget);
          // A call cut off by a cancel (an exec killed mid-command) answers, but not with its outcome: uncertain.
          if (ctx.signal.aborted) throw new BerthError('tool_cancelled', `tool call ${call.toolCallId} (${call.name}) was stopped by cancel while running`);
          // Kept in the receipt, so a receipt reused on recovery still counts the time and says why it stopped.
          if (budget.usedMs > 0) output.commandMs = budget.usedMs;
          if (budget.stopped) Object.assign(output, { content: `${budget.stoppedText()}\n${output.content}`, isError: true, budget: 'stopped' });
          return plainJson(output);
        } catch (err) {
          // A secret that cannot be read, a budget used up before the call's first command, or a
          // cancel that came before its command reached the sandbox stops the use before anything
          // runs: provably not applied (a cancelled `never` call ends the run `cancelled`, not parked).
          if (refusedUntouched(err) || isBerthError(err, 'command_not_started')) untouched = true;
          throw isBerthError(err, 'secret_unavailable') || isBerthError(err, 'command_not_started') || refusedUntouched(err) ? withDelivery(err, 'not_sent', false) : err;
        }
      });
      if (r.status === 'uncertain') {
        status = 'interrupted';
        if (budget.usedMs > 0) result.commandMs = budget.usedMs;
        decision = 'interrupt';
        const why = r.effect.status === 'executing' ? undefined : `the call ended without an answer (${r.reason})`;
        out = { content: interruptedText(r.effect.replay, why), isError: true };
      } else {
        const ran = r.receipt as unknown as RanOutput;
        out = ran;
        if (ran.commandMs) result.commandMs = ran.commandMs;
        if (ran.budget) result.budget = ran.budget;
        // A refused call (a path leaving the workspace) answered, but did nothing: not `ok`.
        status = out.refused ? 'error' : 'ok';
      }
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      ({ status, out } = failure(err, verifying));
      if (isBerthError(err, 'run_budget_exceeded')) result.budget = 'refused';
      if (budget.usedMs > 0) result.commandMs = budget.usedMs;
      if (status === 'interrupted') decision = 'interrupt';
    }
    const writes: NonNullable<ToolDecision['writes']> = { ...acq.writes };
    result.status = status;
    // A call refused at the budget changed nothing: nothing to measure, and nothing more may run.
    if (mutates && !untouched) {
      // Measuring the state the call left (a digest, or a snapshot) is sandbox time the call made: counted, never cut.
      const at = performance.now();
      const rec = await deps.sandbox.record(ctx, input, acq.lease, call.toolCallId, tool.snapshots === true && status === 'ok');
      result.commandMs = (result.commandMs ?? 0) + (performance.now() - at);
      result.sandbox = rec.state;
      if (rec.writes.snapshots) writes.snapshots = rec.writes.snapshots;
      // A demanded snapshot is the call's answer: the result names it.
      if (tool.snapshots === true && status === 'ok' && rec.state.snapshotId) {
        out = { content: `snapshot ${rec.state.snapshotId} (workspace ${rec.state.workspaceDigest})`, isError: false, detail: { snapshotId: rec.state.snapshotId, workspaceDigest: rec.state.workspaceDigest } };
      }
    }
    // Entries the acquisition wrote (a sandbox.verified) come first, then the result.
    writes.entries = [...(acq.writes.entries ?? []), resultEntry(call, status, out.content, out.isError, out.detail)];
    if (decision === 'interrupt') return { type: 'interrupt', reason: `tool call ${call.toolCallId} (${call.name}) may or may not have taken effect`, result, writes };
    return { type: 'complete', result, writes };
  });
}
