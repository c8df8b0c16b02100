import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CancelledNotificationSchema, isInitializeRequest, isJSONRPCRequest, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { cancelRequest } from './client-cancel';

/** The header naming the caller: issued by this server at `initialize`, sent back by the client on every POST after it (the spec's session id). */
export const CALLER_HEADER = 'mcp-session-id';

/**
 * A new caller id for an `initialize` answer: 128 random bits, visible ASCII as the spec asks.
 * It names the caller and nothing more: the server stays stateless (any id, or none, is taken on
 * any request; a client that kept its id across a restart of this server goes on with it). It is
 * what scopes a cancel: every client of one `berth mcp --http` holds the same bearer token, and
 * every SDK client numbers its requests from 0, so neither tells one client's request 3 from
 * another's.
 */
export const newCaller = (): string => randomBytes(16).toString('base64url');

/** The caller a request names, or null (a client that never sent `initialize`, or ignores the header). */
export function callerOf(req: IncomingMessage): string | null {
  const v = req.headers[CALLER_HEADER];
  return typeof v === 'string' && v !== '' ? v : null;
}

const asList = (message: unknown): JSONRPCMessage[] => (Array.isArray(message) ? message : [message]) as JSONRPCMessage[];

/** Whether a POST's message is (or its batch holds) an `initialize` request. */
export const initializes = (message: unknown): boolean => asList(message).some(isInitializeRequest);

/**
 * The requests in flight over HTTP, by caller and request id, each with the server (one per POST)
 * that runs it: so a `notifications/cancelled` POSTed on its own reaches the request it names
 * (over stdio the SDK's protocol matches it on the one connection). Only the caller that sent a
 * request can cancel it: a cancel is matched within its own caller id, and a request or cancel
 * naming no caller is matched to nothing. A cancel naming no request in flight (unknown, or
 * finished) is ignored, as the MCP spec says.
 */
export class InFlight {
  private readonly byKey = new Map<string, Set<Server>>();

  /** Holds a POST's requests under its caller until `release` (its exchange ended). */
  hold(caller: string | null, message: unknown, server: Server): () => void {
    if (caller === null) return () => {};
    const keys = asList(message).filter(isJSONRPCRequest).map((m) => keyOf(caller, m.id));
    for (const k of keys) {
      let s = this.byKey.get(k);
      if (!s) this.byKey.set(k, (s = new Set()));
      s.add(server);
    }
    return () => {
      for (const k of keys) {
        const s = this.byKey.get(k);
        s?.delete(server);
        if (s?.size === 0) this.byKey.delete(k);
      }
    };
  }

  /** Carries out the cancels a POST holds, for requests its caller has in flight; returns how many reached one. */
  cancel(caller: string | null, message: unknown): number {
    if (caller === null) return 0;
    let reached = 0;
    for (const m of asList(message)) {
      const parsed = CancelledNotificationSchema.safeParse(m);
      const id = parsed.success ? parsed.data.params.requestId : undefined;
      if (id === undefined) continue;
      for (const server of this.byKey.get(keyOf(caller, id)) ?? []) {
        cancelRequest(server, id, parsed.data!.params.reason);
        reached += 1;
      }
    }
    return reached;
  }
}

/** One key per caller and id: 1 and "1" are different JSON-RPC ids. */
const keyOf = (caller: string, id: RequestId) => `${caller}\u0000${typeof id}:${id}`;
