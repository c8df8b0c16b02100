import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import { WireError } from './wire-error';
import { CALL_CANCELLED } from './queued-turn';

/**
 * A signal that aborts when the client cancels the request (`notifications/cancelled`, which the
 * SDK's client also sends when its own request timeout passes) while it is still connected. The
 * request's own signal aborts for that and also when the connection closes; a client that went
 * away is not a cancel (its call goes on, and a repeat of its call_id gets the outcome), so the
 * two are told apart by whether the server still has its transport once the abort settles: the
 * SDK drops it right after aborting every request of a closed connection.
 */
export function cancelledByClient(server: Server, request: AbortSignal, onTimedOut: () => void = () => {}): AbortSignal {
  const cancelled = new AbortController();
  request.addEventListener('abort', () => setImmediate(() => {
    if (!server.transport) return;
    if (clientTimedOut(request.reason)) onTimedOut();
    else cancelled.abort(request.reason);
  }), { once: true });
  return cancelled.signal;
}

/**
 * A cancel the SDK's client sends because its own request timeout passed (60 s by default; its
 * reason is the McpError it rejected with, code -32001 RequestTimeout): the client stopped
 * waiting, nobody asked for the work to stop. Taken as a cancel, every exec of a default client
 * longer than a minute (a build, a test suite) was killed there and left its session waiting for
 * a reconcile decision; it runs on instead, and a repeat of its call_id gets its outcome.
 */
export function clientTimedOut(reason: unknown): boolean {
  return /\bMCP error -32001\b/.test(String(reason));
}

/**
 * Cancels that reach a server's request from outside its own transport, by request id. Over HTTP
 * every POST has its own server, so a `notifications/cancelled` POSTed on its own lands on a server
 * that never saw the request it names (the SDK's protocol ignores it there): mcp-http.ts finds the
 * server holding that request (http-cancel.ts) and cancels it here. A controller is made by
 * whichever comes first, the request's handler or the cancel (one may arrive while the request's
 * POST is still on its way to its handler).
 */
const outside = new WeakMap<Server, Map<RequestId, AbortController>>();

function controllerOf(server: Server, id: RequestId): AbortController {
  let byId = outside.get(server);
  if (!byId) outside.set(server, (byId = new Map()));
  let c = byId.get(id);
  if (!c) byId.set(id, (c = new AbortController()));
  return c;
}

/** Cancels request `id` of `server` as its client's `notifications/cancelled` would on its own transport. */
export function cancelRequest(server: Server, id: RequestId, reason: unknown): void {
  controllerOf(server, id).abort(reason);
}

/**
 * Runs a request's handler with a signal that aborts as the request's own does (a cancel on its
 * transport, the connection's end) and also on `cancelRequest`. A request cancelled that way is
 * answered `request_cancelled` whatever its handler ends with, once it has ended (so its call's
 * run is cancelled, or let run on after the client's own timeout, before the answer lets the HTTP
 * exchange and its server close): the SDK's protocol answers nothing to a request cancelled on its
 * transport, but an HTTP POST must be answered, or it stays open until the client goes.
 */
export async function withOutsideCancel<T>(server: Server, extra: { signal: AbortSignal; requestId: RequestId }, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const own = controllerOf(server, extra.requestId);
  try {
    if (own.signal.aborted) throw cancelledError(extra.requestId, own.signal.reason, false);
    const settled = await run(AbortSignal.any([extra.signal, own.signal])).then(
      (v) => ({ ok: true as const, v }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    if (own.signal.aborted) {
      // cancelledByClient decides a cancel one turn after the abort (setImmediate): that turn is
      // waited for, or the answer could close the server first and the cancel read as a client gone.
      await new Promise((r) => setImmediate(r));
      throw cancelledError(extra.requestId, own.signal.reason, !notSubmitted(settled.ok ? undefined : settled.err));
    }
    if (!settled.ok) throw settled.err;
    return settled.v;
  } finally {
    outside.get(server)?.delete(extra.requestId);
  }
}

/**
 * Whether a handler's error says its call was cancelled before it was submitted (queued-turn.ts: it
 * waited for its session's turn, or the cancel came before its submit), so the answer says nothing
 * ran rather than that a running call was stopped. Seen as the handler throws it: a wire error
 * (mcp-server.ts `toMcpError`) with the Berth code in `data.code`.
 */
const notSubmitted = (err: unknown): boolean => (err as { data?: { code?: unknown } } | undefined)?.data?.code === CALL_CANCELLED;

function cancelledError(id: RequestId, reason: unknown, started: boolean): WireError {
  const why = reason === undefined ? '' : ` (${String(reason).slice(0, 200)})`;
  const what = !started
    ? 'before it started; nothing ran'
    : clientTimedOut(reason)
      ? 'because its own request timeout passed; a call goes on, and a repeat of its call_id gets its outcome'
      : 'while it ran; a call is stopped, and status or a repeat of its call_id tells how it ended';
  return new WireError(REQUEST_CANCELLED, `request_cancelled: the client cancelled request ${JSON.stringify(id)}${why} ${what}`, { code: 'request_cancelled', requestId: id });
}

/** The JSON-RPC code of an answer to a cancelled request (MCP names none; LSP's RequestCancelled). */
const REQUEST_CANCELLED = -32800;
