import { z } from 'zod';
import type { TypedDecision } from '../kernel';
import { plainJson, type Json } from '../model';
import type { ToolCallInput } from './agent-input';
import { ENTRY, type ToolResultEntry, type ToolResultStatus } from './entries';
import type { SandboxState } from './agent-sandbox';

/** What a tool task leaves as its result: the status, and the sandbox state it vouches for. */
export const ToolTaskResultSchema = z.object({
  toolCallId: z.string(),
  status: z.enum(['ok', 'error', 'invalid', 'interrupted', 'denied', 'expired']) satisfies z.ZodType<ToolResultStatus>,
  sandbox: z.object({ measuredAt: z.number(), workspaceDigest: z.string(), snapshotId: z.string().nullable() }).optional() satisfies z.ZodType<SandboxState | undefined>,
  /**
   * Milliseconds the call took in the sandbox: what `resources.runBudgetS` counts (absent: nothing).
   * Its plan's, run's and verify's commands, each from asked to answered, and the measurement of
   * the state it left (README: The run's command budget).
   */
  commandMs: z.number().min(0).optional(),
  /** The run's budget ended with this call: its command was stopped at it, or the call was not started. The run then fails. */
  budget: z.enum(['stopped', 'refused']).optional(),
});
export type ToolTaskResult = z.infer<typeof ToolTaskResultSchema>;

/** The entry the model will read for this call. */
export function resultEntry(call: ToolCallInput, status: ToolResultStatus, content: string, isError: boolean, detail?: Json) {
  const body: ToolResultEntry = { toolCallId: call.toolCallId, name: call.name, status, isError, content, ...(detail === undefined ? {} : { detail }) };
  return { kind: ENTRY.toolResult, body: plainJson(body) };
}

/** A tool task that ends with a result the model reads, and nothing run (invalid, denied, expired, refused plan). */
export function finishWithout(call: ToolCallInput, status: ToolResultStatus, content: string, extra: NonNullable<TypedDecision<never, ToolTaskResult>['writes']>['entries'] = []): TypedDecision<never, ToolTaskResult> {
  const result: ToolTaskResult = { toolCallId: call.toolCallId, status };
  return { type: 'complete', result, writes: { entries: [...extra, resultEntry(call, status, content, true)] } };
}
