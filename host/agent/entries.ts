import type { Json } from '../model';
import type { ModelToolCall, ModelUsage } from './model';

/**
 * Entry kinds of an agent session. The model context is rebuilt from these (user, model and tool
 * result entries); the others are records for operators and are never shown to the model.
 */
export const ENTRY = {
  user: 'agent.user',
  model: 'agent.model',
  toolResult: 'agent.tool_result',
  /** A model request that did not produce a complete answer, with any text that streamed. */
  interruption: 'agent.interruption',
  approvalRequested: 'agent.approval.requested',
  approvalDecided: 'agent.approval.decided',
  /** How the context is shortened from here on (host/agent/context-budget.ts); the store keeps everything. */
  compaction: 'agent.compaction',
} as const;

export interface UserEntry {
  text: string;
}

/** One complete model answer; `usage` is the token count of the request that produced it. */
export interface ModelEntry {
  turn: number;
  content: string | null;
  toolCalls: ModelToolCall[];
  finishReason: string;
  model: string;
  usage: ModelUsage | null;
}

/**
 * `ok` ran and answered (possibly a command that exited non-zero: see `isError`); `error` failed
 * or was refused; `invalid` never ran (unknown tool, bad arguments); `interrupted` may or may not
 * have taken effect; `denied` and `expired` never ran for want of an approval.
 */
export type ToolResultStatus = 'ok' | 'error' | 'invalid' | 'interrupted' | 'denied' | 'expired';

export interface ToolResultEntry {
  toolCallId: string;
  name: string;
  status: ToolResultStatus;
  isError: boolean;
  content: string;
  detail?: Json;
}

export interface InterruptionEntry {
  turn: number;
  attempt: number;
  code: string;
  message: string;
  /** Text that streamed before the request broke off; never used to drive tools. */
  partialText: string;
  /**
   * A refusal for length (`model_context_overflow`) that stated the window: the window, the
   * prompt's tokens as the endpoint counted them, and the request's size in bytes. The next
   * `prepare` compacts to that window, with the estimate corrected by the endpoint's own count.
   */
  overflow?: { contextTokens: number; promptTokens: number | null; requestBytes: number };
}

export interface ApprovalRequestedEntry {
  approvalId: string;
  toolCallId: string;
  tool: string;
  arguments: Json;
  digest: string;
  expiresAt: number;
}

export interface ApprovalDecidedEntry {
  approvalId: string;
  toolCallId: string;
  /** `cancelled`: the run was cancelled while the call waited; `by` is whoever cancelled it. */
  decision: 'approved' | 'denied' | 'expired' | 'cancelled';
  by: string;
  digest: string;
}

/**
 * A durable compaction: from this entry on, the context leaves out the oldest `droppedTurns` model
 * turns (with their tool results, and the user messages among them except the session's first and
 * newest) and shows the tool results of the oldest `stubbedTurns` (dropped ones included) as stubs.
 * Turns are counted by position among the session's model entries, so a fork (which copies the
 * entries in order) sees the same cut. Sizes are the estimate's, in tokens.
 */
export interface CompactionEntry {
  rule: 'stub-then-drop/1';
  turn: number;
  stubbedTurns: number;
  droppedTurns: number;
  contextTokens: number;
  budgetTokens: number;
  estimatedBefore: number;
  estimatedAfter: number;
  bytesPerToken: number;
}
