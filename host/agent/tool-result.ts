import type { Decision } from '../kernel';
import type { Json } from '../model';
import type { ToolCallInput } from './agent-input';
import { ENTRY, type ToolResultEntry, type ToolResultStatus } from './entries';
import type { SandboxState } from './agent-sandbox';
import { json } from './agent-deps';

/** What a tool task leaves as its result: the status, and the sandbox state it vouches for. */
export interface ToolTaskResult {
  toolCallId: string;
  status: ToolResultStatus;
  sandbox?: SandboxState;
}

/** The entry the model will read for this call. */
export function resultEntry(call: ToolCallInput, status: ToolResultStatus, content: string, isError: boolean, detail?: Json) {
  const body: ToolResultEntry = { toolCallId: call.toolCallId, name: call.name, status, isError, content, ...(detail === undefined ? {} : { detail }) };
  return { kind: ENTRY.toolResult, body: json(body) };
}

/** A tool task that ends with a result the model reads, and nothing run (invalid, denied, expired, refused plan). */
export function finishWithout(call: ToolCallInput, status: ToolResultStatus, content: string, extra: NonNullable<Decision['writes']>['entries'] = []): Decision {
  const result: ToolTaskResult = { toolCallId: call.toolCallId, status };
  return { type: 'complete', result: json(result), writes: { entries: [...extra, resultEntry(call, status, content, true)] } };
}
