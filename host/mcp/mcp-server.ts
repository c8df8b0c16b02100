import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ENTRY, type ToolResultEntry } from '../agent';
import type { Berth } from '../api/berth';
import { forkAgentSession } from '../api/forks';
import { BerthError, isBerthError } from '../errors';
import { isFinalRunState, type Run } from '../model';
import { KERNEL } from '../version';
import { cutShort, dictatedCallOf } from './cut-short';
import { addRecordResources } from './mcp-resources';
import { setCheckedHandler } from './checked-handler';
import { cancelledByClient } from './client-cancel';
import { deeperThan } from '../support/json-depth';
import { WireError } from './wire-error';
import { checkArgumentSizes } from './argument-limits';
import { progressIntervalMs, reportProgress } from './call-progress';
import { McpSessions, type CallOutcome } from './mcp-session';
import { SANDBOX_TOOL_NAMES, SESSION_TOOLS, sandboxTools } from './mcp-tools';

/** The deepest nesting of tool arguments taken: far beyond any tool's schema, far below the stack's limit (a 40 KB line nesting 20,000 deep overflowed it). */
const MAX_ARGUMENT_DEPTH = 64;

/** Codes that say the request itself was wrong (the client can fix it), as opposed to a host failure. */
const CLIENT_ERRORS = new Set([
  'call_id_reused',
  'fork_invalid',
  'snapshot_pruned',
  'session_not_found',
  'session_required',
  'session_needs_reconciliation',
  'session_busy',
  'session_served_elsewhere',
  'session_model_driven',
  'usage',
  'run_not_reconcilable',
]);

/** A Berth error as a JSON-RPC error: the stable code, retryable and ids in `data` (and, for the client's own errors, their details). */
export function toMcpError(err: unknown): McpError {
  if (err instanceof McpError) return err;
  if (isBerthError(err)) {
    const mine = CLIENT_ERRORS.has(err.code);
    return new WireError(mine ? ErrorCode.InvalidParams : ErrorCode.InternalError, `${err.code}: ${err.message}`, { code: err.code, retryable: err.retryable, ids: err.ids ?? {}, ...(mine && err.details ? { details: err.details } : {}) });
  }
  return new WireError(ErrorCode.InternalError, err instanceof Error ? err.message : String(err), { code: 'internal' });
}

function callResult(o: CallOutcome): CallToolResult {
  return {
    content: [{ type: 'text', text: o.content }],
    isError: o.isError,
    structuredContent: { session: o.sessionId, run: o.runId, call_id: o.callId, tool: o.tool, status: o.status },
  };
}

const str = (v: unknown, name: string): string | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !v) throw new WireError(ErrorCode.InvalidParams, `${name} must be a non-empty string`, { code: 'usage' });
  return v;
};

export interface McpServerOptions {
  /** How often a call whose request has a progress token gets `notifications/progress` (call-progress.ts); default `BERTH_MCP_PROGRESS_MS` or 5 s. */
  progressMs?: number;
}

/**
 * The SDK's JSON Schema validator, made at its first use: the server validates only what a client
 * answers to an elicitation, which Berth never asks for, and the default one (Ajv with its formats)
 * was made with every server, ~10 ms of CPU in a start a reconnecting client waits for.
 */
function validatorOnFirstUse(): jsonSchemaValidator {
  let real: AjvJsonSchemaValidator | undefined;
  return { getValidator: (schema) => (real ??= new AjvJsonSchemaValidator()).getValidator(schema) };
}

/** An MCP server over one Berth host: the sandbox tools, `status` and `reconcile`, for any transport. */
export function createMcpServer(berth: Berth, sessions: McpSessions, o: McpServerOptions = {}): Server {
  const progressMs = o.progressMs ?? progressIntervalMs();
  const server = new Server({ name: 'berth', version: KERNEL.version }, { capabilities: { tools: {}, resources: {} }, jsonSchemaValidator: validatorOnFirstUse() });
  setCheckedHandler(server, 'tools/list', ListToolsRequestSchema, async () => ({ tools: [...sandboxTools(), ...SESSION_TOOLS] }));
  setCheckedHandler(server, 'tools/call', CallToolRequestSchema, async (req, extra) => {
    const { name } = req.params;
    if (deeperThan(req.params.arguments, MAX_ARGUMENT_DEPTH)) {
      throw new WireError(ErrorCode.InvalidParams, `invalid tools/call request: params.arguments nest deeper than ${MAX_ARGUMENT_DEPTH} levels of arrays and objects`, { code: 'usage', field: 'params.arguments' });
    }
    checkArgumentSizes(req.params.arguments ?? {});
    const { session, call_id, ...args } = (req.params.arguments ?? {}) as Record<string, unknown>;
    const stopProgress = SANDBOX_TOOL_NAMES.has(name) ? reportProgress(extra, name, progressMs) : () => {};
    try {
      const sessionId = str(session, 'session');
      if (SANDBOX_TOOL_NAMES.has(name)) return callResult(await sessions.call(name, args, { sessionId, callId: str(call_id, 'call_id'), signal: extra.signal, cancel: cancelledByClient(server, extra.signal, () => process.stderr.write(`berth mcp: the client stopped waiting for call ${str(call_id, 'call_id') ?? '(no call_id)'} (its own request timeout); the call goes on, and a repeat with the same call_id gets its outcome\n`)) }));
      if (name === 'status') return await status(berth, sessions, sessionId);
      if (name === 'reconcile') return await reconcile(berth, sessions, sessionId, args.decision);
      if (name === 'fork') return await fork(berth, sessions, sessionId, args.after_call);
      // -32602 as the MCP spec has it: tools/call exists (-32601 told a client the method did not).
      throw new WireError(ErrorCode.InvalidParams, `no tool named ${JSON.stringify(name).slice(0, 200)}; the tools are ${[...SANDBOX_TOOL_NAMES, ...SESSION_TOOLS.map((t) => t.name)].join(', ')}`, { code: 'tool_unknown' });
    } catch (err) {
      throw toMcpError(err);
    } finally {
      stopProgress();
    }
  });
  addRecordResources(server, berth, sessions, toMcpError, progressMs);
  return server;
}

async function which(sessions: McpSessions, given: string | undefined): Promise<string> {
  const id = given ?? sessions.sessionId;
  if (!id) throw new BerthError('session_required', 'no session yet: make a call first, or pass `session`');
  await sessions.requireSession(id);
  return id;
}

async function status(berth: Berth, sessions: McpSessions, given: string | undefined): Promise<CallToolResult> {
  const sessionId = await which(sessions, given);
  await sessions.ended(sessionId);
  const runs = await berth.list({ sessionId });
  const results = new Map((await berth.store.listEntries(sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => [e.runId, e.body as unknown as ToolResultEntry]));
  const calls = [];
  for (const r of runs) {
    const res = results.get(r.id);
    if (res) calls.push({ run: r.id, run_state: r.state, call_id: res.toolCallId, tool: res.name, status: res.status === 'interrupted' ? 'uncertain' : res.status });
    else calls.push({ run: r.id, run_state: r.state, ...(await unanswered(berth, r)) });
  }
  const awaiting = runs.find((r) => r.state === 'needs_reconciliation');
  const summary = { session: sessionId, calls, awaiting_reconcile: awaiting?.id ?? null };
  return { content: [{ type: 'text', text: JSON.stringify(summary, null, 2) }], structuredContent: summary };
}

/** A call without a result: running (`pending`), or cut short by a cancel (cut-short.ts). */
async function unanswered(berth: Berth, run: Run): Promise<{ call_id: string | null; tool: string | null; status: string }> {
  const call = await dictatedCallOf(berth.store, run);
  const short = isFinalRunState(run.state) || run.state === 'needs_reconciliation' ? await cutShort(berth.store, run) : null;
  return { call_id: call?.callId ?? null, tool: call?.tool ?? null, status: short?.status ?? (isFinalRunState(run.state) ? run.state : 'pending') };
}

async function reconcile(berth: Berth, sessions: McpSessions, given: string | undefined, decision: unknown): Promise<CallToolResult> {
  if (decision !== 'accept' && decision !== 'fail') throw new WireError(ErrorCode.InvalidParams, 'decision must be accept or fail', { code: 'usage' });
  const sessionId = await which(sessions, given);
  const run = (await berth.list({ sessionId })).find((r) => r.state === 'needs_reconciliation');
  if (!run) throw new BerthError('run_not_reconcilable', `session ${sessionId} has no call awaiting a decision`, { ids: { sessionId } });
  // `fail` ends the call's run failed and leaves its effect uncertain: nobody said it did not happen
  // (answering so would let a fork run a never call again), and a failed run runs nothing again.
  const r = await berth.reconcile(run.id, decision === 'accept' ? { accept: true } : { fail: true });
  const after = await berth.get(run.id);
  const out = { session: sessionId, run: run.id, decision, run_state: after.state, outcome: r.kind };
  return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
}

async function fork(berth: Berth, sessions: McpSessions, given: string | undefined, afterCall: unknown): Promise<CallToolResult> {
  if (typeof afterCall !== 'number' || !Number.isInteger(afterCall) || afterCall < 1) throw new WireError(ErrorCode.InvalidParams, 'after_call must be a whole number >= 1', { code: 'usage' });
  const sessionId = await which(sessions, given);
  const f = await forkAgentSession(berth, sessionId, String(afterCall), berth.actor);
  const out = { session: f.sessionId, forked_from: sessionId, after_call: afterCall, run: f.forkedFrom.runId, snapshot: f.forkedFrom.snapshotId };
  return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
}
