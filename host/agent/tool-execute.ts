import { isBerthError } from '../errors';
import { resolveFlag, type ToolOutput, type ToolRunContext } from '../../tools';
import type { Decision, PhaseContext, PerformOutcome } from '../kernel';
import type { Json, ReplayPolicy } from '../model';
import type { Lease } from '../sandbox';
import { checkpointOf, inputOf, json, runInputOf, type AgentDeps } from './agent-deps';
import type { AgentRunInput, ToolCallInput } from './agent-input';
import type { ToolResultStatus } from './entries';
import { resultEntry, type ToolTaskResult } from './tool-result';

/** The committed intent `execute` works from; nothing here is recomputed after `call`. */
export interface ExecuteCheckpoint {
  effectId: string;
  replay: ReplayPolicy;
  args: Json;
  plan: Json;
}

export function toolContext(deps: AgentDeps, ctx: PhaseContext, input: AgentRunInput, call: ToolCallInput, lease: Lease): ToolRunContext {
  const runId = ctx.task.runId!;
  return {
    sandbox: lease,
    signal: ctx.signal,
    commandTimeoutMs: input.environment.resources.commandTimeoutS * 1000,
    onOutput: deps.onLive ? (stream, text) => deps.onLive!({ type: 'tool-output', runId, toolCallId: call.toolCallId, stream, text }) : undefined,
  };
}

const interruptedText = (policy: ReplayPolicy) =>
  `error: the host stopped while this call was running, so it may or may not have taken effect. ` +
  `Its replay policy (${policy}) does not allow repeating it automatically. Check the sandbox (e.g. the files it would change) before running it again.`;

/**
 * Runs the call once under its effect record, with the session's sandbox to itself. On recovery
 * `perform` decides: a confirmed receipt is reused, a `safe` call (safe then and now) runs again,
 * a `verify` tool is asked whether the original call took effect, anything else is uncertain and
 * the model is told so. A mutating call's resulting sandbox state commits with its result.
 */
export async function executePhase(deps: AgentDeps, ctx: PhaseContext): Promise<Decision> {
  const call = inputOf<ToolCallInput>(ctx);
  const cp = checkpointOf<ExecuteCheckpoint>(ctx);
  const input = await runInputOf(deps.store, ctx.task);
  const tool = deps.tools.get(call.name);
  if (!tool) {
    const text = `error: tool ${call.name} is not available in this host any more; the call did not run`;
    return { type: 'interrupt', reason: text, result: json({ toolCallId: call.toolCallId, status: 'error' }), writes: { entries: [resultEntry(call, 'error', text, true)] } };
  }
  const policyNow = resolveFlag(tool.replay, cp.args);
  const mutates = resolveFlag(tool.mutates, cp.args);
  return deps.sandbox.exclusive(ctx.task.sessionId, async (): Promise<Decision> => {
    const acq = await deps.sandbox.ensure(ctx, input);
    if (acq.kind === 'reconcile') {
      const text = `error: the sandbox cannot be used (${acq.reason}); the call did not run`;
      return { type: 'interrupt', reason: acq.reason, result: json({ toolCallId: call.toolCallId, status: 'error' }), writes: { entries: [resultEntry(call, 'error', text, true)] } };
    }
    const tctx = toolContext(deps, ctx, input, call, acq.lease);
    const spec = {
      id: cp.effectId,
      kind: `tool.${call.name}`,
      intent: json({ tool: call.name, args: cp.args, plan: cp.plan }),
      replay: policyNow,
      verify: tool.verify
        ? async () => {
            const v = await tool.verify!(tctx, cp.args, cp.plan);
            return v.done ? { done: true as const, receipt: json(v.output) } : { done: false as const };
          }
        : undefined,
    };
    let status: ToolResultStatus;
    let out: ToolOutput;
    let decision: 'complete' | 'interrupt' = 'complete';
    try {
      const r: PerformOutcome<Json> = await ctx.perform(spec, async () => json(await tool.run(tctx, cp.args, cp.plan)));
      if (r.status === 'uncertain') {
        status = 'interrupted';
        decision = 'interrupt';
        out = { content: interruptedText(r.effect.replay), isError: true };
      } else {
        out = r.receipt as unknown as ToolOutput;
        status = 'ok';
      }
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      const msg = isBerthError(err) ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
      status = 'error';
      out = { content: `error: the tool failed: ${msg}`, isError: true };
    }
    const writes = { ...acq.writes, entries: [resultEntry(call, status, out.content, out.isError, out.detail)] };
    const result: ToolTaskResult = { toolCallId: call.toolCallId, status };
    if (mutates) {
      const rec = await deps.sandbox.record(ctx, input, acq.lease, call.toolCallId);
      result.sandbox = rec.state;
      if (rec.writes.snapshots) writes.snapshots = rec.writes.snapshots;
    }
    if (decision === 'interrupt') return { type: 'interrupt', reason: `tool call ${call.toolCallId} (${call.name}) was in flight when the host stopped`, result: json(result), writes };
    return { type: 'complete', result: json(result), writes };
  });
}
