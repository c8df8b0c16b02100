import { z } from 'zod';
import { BerthError } from '../errors';
import type { TypedDecision, TypedPhaseContext } from '../kernel';
import { JsonSchema, REPLAY_POLICIES } from '../model';
import type { ToolCallInput } from './agent-input';
import { TOOL_KIND } from './agent-sandbox';
import type { ToolTaskResult } from './tool-result';

/**
 * The committed intent `execute` works from; nothing here is recomputed after `call`. The
 * arguments are the effect record's (`intent.args`, committed in the same commit): a copy here
 * made every later commit of the task rewrite them with its row, a large `write_file`'s content
 * included (SQLite writes a row whole). A checkpoint an older host committed still holds `args`.
 */
export const ExecuteCheckpointSchema = z.object({
  effectId: z.string(),
  replay: z.enum(REPLAY_POLICIES),
  args: JsonSchema.optional(),
  plan: JsonSchema,
  /** Milliseconds the plan's commands took (in `call`): the call's first share of `resources.runBudgetS`. */
  planMs: z.number().min(0).optional(),
});
export type ExecuteCheckpoint = z.infer<typeof ExecuteCheckpointSchema>;

/** What an approval decision delivers (by `berth approve|deny` or the expiry timer). */
export const ApprovalSignalSchema = z.object({
  decision: z.enum(['approve', 'deny', 'expired']),
  /** The digest the decider approved; must equal the request's. */
  digest: z.string().nullable(),
  by: z.string(),
  at: z.number(),
});
export type ApprovalSignal = z.infer<typeof ApprovalSignalSchema>;

/** The open request, kept in the tool task's checkpoint while it waits. */
export const ApprovalRequestSchema = z.object({ id: z.string(), digest: z.string(), expiresAt: z.number() });
export type ApprovalRequest = z.infer<typeof ApprovalRequestSchema>;

/** The tool task's checkpoint: the open approval request (and its decision once delivered), or the committed intent. */
export const ToolCheckpointSchema = z.union([z.object({ request: ApprovalRequestSchema, approval: ApprovalSignalSchema.optional() }), ExecuteCheckpointSchema]);
type ToolCheckpoint = z.infer<typeof ToolCheckpointSchema>;
export type ToolContext = TypedPhaseContext<ToolCallInput, ToolCheckpoint>;
export type ToolDecision = TypedDecision<ToolCheckpoint, ToolTaskResult>;

/** The checkpoint a phase needs, or a typed error: the other shape in this phase means the stored state drifted. */
export function toolState<K extends 'request' | 'effectId'>(ctx: ToolContext, key: K): Extract<ToolCheckpoint, Record<K, unknown>> {
  const cp = ctx.state;
  if (cp && key in cp) return cp as Extract<ToolCheckpoint, Record<K, unknown>>;
  throw new BerthError('checkpoint_invalid', `${TOOL_KIND} checkpoint in phase ${ctx.task.phase}: ${key}: missing`, { ids: { taskId: ctx.task.id } });
}

