import type { Server } from '@modelcontextprotocol/sdk/server/index.js';

/**
 * A signal that aborts when the client cancels the request (`notifications/cancelled`, which the
 * SDK's client also sends when its own request timeout passes) while it is still connected. The
 * request's own signal aborts for that and also when the connection closes; a client that went
 * away is not a cancel (its call goes on, and a repeat of its call_id gets the outcome), so the
 * two are told apart by whether the server still has its transport once the abort settles: the
 * SDK drops it right after aborting every request of a closed connection.
 */
export function cancelledByClient(server: Server, request: AbortSignal): AbortSignal {
  const cancelled = new AbortController();
  request.addEventListener('abort', () => setImmediate(() => server.transport && cancelled.abort(request.reason)), { once: true });
  return cancelled.signal;
}
