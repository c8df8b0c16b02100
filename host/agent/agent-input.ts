import { z } from 'zod';
import { EnvironmentSchema } from '../../environment';
import { ModelConfigSchema } from './model';

export const DEFAULT_SYSTEM_PROMPT =
  'You are a coding agent working in a sandboxed workspace. Use the tools to inspect and change files and to run commands. ' +
  'When a tool result says a call was interrupted, its effect is uncertain: check the state before repeating it. Answer without tool calls when the task is done.';

/** How old tool outputs are shortened in the model context (the store keeps them whole). */
export const CompactionSchema = z.strictObject({
  /** Tool results of the newest this-many model turns are shown up to each tool's `contextCap`. */
  keepRecentTurns: z.number().int().min(0).default(3),
  /** Older tool results keep this many characters (head and tail) and a note where the rest is. */
  oldOutputChars: z.number().int().min(0).default(600),
  /**
   * The token estimate is the UTF-8 size of the request's messages and tools (as JSON) divided by
   * this: 3 is conservative for English, code and JSON (real tokenizers average 3.5-4.5 bytes).
   */
  bytesPerToken: z.number().positive().default(3),
  /** Tokens of the window kept free for the answer when `model.maxTokens` is not set. */
  replyTokens: z.number().int().min(0).default(512),
  /**
   * A compaction shortens the context to at most this share of the budget, so the turns after it
   * are sent unchanged (and an endpoint's prompt cache keeps working) until the next one.
   */
  targetShare: z.number().gt(0).max(1).default(0.6),
});

/** Everything about an agent run except the environment and the message: fixed at submission. */
export const AgentSettingsSchema = z.strictObject({
  model: ModelConfigSchema,
  systemPrompt: z.string().default(DEFAULT_SYSTEM_PROMPT),
  /** Tool names the model may call; default every registered tool. */
  tools: z.array(z.string()).optional(),
  /** Tool names whose every call needs an operator's approval (besides tools that always ask). */
  requireApproval: z.array(z.string()).default([]),
  /** How long an approval request stays open before it expires (and counts as not approved). */
  approvalTtlMs: z.number().int().positive().default(3_600_000),
  /** Model turns per run; a run that needs more fails with `turn_limit`. */
  maxTurns: z.number().int().positive().default(40),
  compaction: CompactionSchema.prefault({}),
});
export type AgentSettings = z.infer<typeof AgentSettingsSchema>;
export type AgentSettingsInput = z.input<typeof AgentSettingsSchema>;

/** The root task's input: a run's settings and environment as they were when it was submitted. */
export const AgentRunInputSchema = z.object({
  settings: AgentSettingsSchema,
  environment: EnvironmentSchema,
  envFingerprint: z.string(),
  /** Host directory uploaded into the workspace when the session's sandbox is first leased. */
  workspaceDir: z.string().nullable(),
  message: z.string(),
});
export type AgentRunInput = z.infer<typeof AgentRunInputSchema>;

export const GenerationInputSchema = z.object({
  turn: z.number().int().positive(),
  /** What was left of the run's budget (`resources.runBudgetS`) when the turn began; absent in turns of older hosts. */
  budgetMs: z.number().optional(),
});
export type GenerationInput = z.infer<typeof GenerationInputSchema>;

/** One tool call as the generation task committed it; `arguments` is the model's raw text. */
export const ToolCallInputSchema = z.object({
  toolCallId: z.string(),
  name: z.string(),
  arguments: z.string(),
  turn: z.number().int(),
  index: z.number().int(),
  /** Set when the call needs an approval: the moment the request expires. */
  approvalExpiresAt: z.number().nullable(),
  /** The turn's budget (`resources.runBudgetS` less what earlier turns' commands took); absent in calls of older hosts. */
  budgetMs: z.number().optional(),
});
export type ToolCallInput = z.infer<typeof ToolCallInputSchema>;

export const ApprovalTimerInputSchema = z.object({
  toolCallId: z.string(),
  expiresAt: z.number(),
});
export type ApprovalTimerInput = z.infer<typeof ApprovalTimerInputSchema>;
