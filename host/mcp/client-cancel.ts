import type { Server } from '@modelcontextprotocol/sdk/server/index.js';

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
