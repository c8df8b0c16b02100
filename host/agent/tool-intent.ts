import { resolveFlag, type AnyTool } from '../../tools';
import type { EffectIntent, SpawnSpec } from '../kernel';
import { plainJson, type Json } from '../model';
import { newId } from '../support/ids';
import type { ToolCallInput } from './agent-input';
import { TOOL_KIND } from './agent-sandbox';
import type { ExecuteCheckpoint } from './tool-checkpoint';

/** A call's committed intent: the checkpoint `execute` works from and its effect record (the fixed arguments, effect id, replay policy). */
export function toolIntent(runId: string | null, taskId: string, call: ToolCallInput, tool: AnyTool, args: unknown, plan: Json, planMs = 0): { checkpoint: ExecuteCheckpoint; effect: EffectIntent } {
  const replay = resolveFlag(tool.replay, args);
  const effectId = `${runId}:${taskId}:${call.toolCallId}`;
  return {
    checkpoint: { effectId, replay, plan, ...(planMs > 0 ? { planMs } : {}) },
    effect: { id: effectId, kind: `tool.${call.name}`, intent: plainJson({ tool: call.name, args, plan }), replay },
  };
}

/**
 * The tool task of a call whose intent is known when the turn's answer commits: valid arguments,
 * no approval to wait for and no plan to fix in the sandbox first. Its intent commits with the
 * answer that makes the call (the model entry) and the task begins in `execute`: the same
 * boundary as the `call` phase's commit (intent durable, the action not begun: the effect is
 * `intended` until `execute` marks it executing), two commits fewer per call (the task's start
 * and its `call` step). Any other call is spawned at `call`, which checks and decides it there.
 */
export function begunToolTask(runId: string | null, call: ToolCallInput, tool: AnyTool, args: unknown): SpawnSpec {
  const id = newId('task');
  const { checkpoint, effect } = toolIntent(runId, id, call, tool, args, null);
  return { kind: TOOL_KIND, input: call, begin: { id, phase: 'execute', checkpoint, effects: [effect] } };
}
