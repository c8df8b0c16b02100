import type { ToolResultStatus } from '../agent';

/** How an MCP client's call ended, from the committed tool result (never from memory). */
export interface CallOutcome {
  sessionId: string;
  runId: string;
  callId: string;
  tool: string;
  /** `uncertain`: the host stopped while a call that may not be repeated was running; it was not run again. */
  status: ToolResultStatus | 'uncertain';
  isError: boolean;
  content: string;
  /** The tool's structured detail (e.g. `exec`: exitCode, timedOut), when it gave one. */
  detail?: unknown;
}

export interface CallOptions {
  sessionId?: string;
  callId?: string;
  /** The request's: aborted when the client cancels it or goes away; the answer is no longer awaited (the call goes on). */
  signal?: AbortSignal;
  /** Aborted when the client cancels the call: its run is cancelled. */
  cancel?: AbortSignal;
}
