import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { Protocol, type RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { ErrorCode, type ServerNotification, type ServerRequest, type ServerResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { WireError } from './wire-error';
import { withOutsideCancel } from './client-cancel';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;
type Issue = { code: string; path: PropertyKey[]; message: string; expected?: string };

const kindOf = (v: unknown): string => (v === undefined ? 'missing' : v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`);
const EXPECTED: Record<string, string> = { record: 'a JSON object', object: 'a JSON object', string: 'a string', number: 'a number', boolean: 'a boolean', array: 'an array' };

function valueAt(v: unknown, path: PropertyKey[]): unknown {
  let at = v;
  for (const k of path) at = at !== null && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[k] : undefined;
  return at;
}

/** One line naming the field and what was wrong with it: `params.arguments must be a JSON object, not an array`. */
export function describeIssue(issue: Issue, request: unknown): string {
  const field = issue.path.map(String).join('.') || 'the request';
  if (issue.code === 'invalid_type' && issue.expected) return `${field} must be ${EXPECTED[issue.expected] ?? issue.expected}, not ${kindOf(valueAt(request, issue.path))}`;
  return `${field}: ${issue.message}`;
}

/**
 * Registers a request handler whose request is checked against `schema` here. The SDK parses a
 * request before its handler runs and sends a parse failure as -32603 (internal error) with zod's
 * multi-line dump of every issue as the message (for tools/call its Server wraps the handler in
 * another parse, -32602 with the same dump): a client that sent `arguments: []` read a server fault.
 * Here the request reaches the handler as it came, and one that does not fit is answered -32602
 * naming the field (`data.code: "usage"`, `data.field`), as the tools' own argument errors are.
 * Registered on the protocol directly: the Server's tools/call wrapper would parse first. The
 * handler's signal also aborts on a cancel that reaches the request from outside its transport
 * (over HTTP, client-cancel.ts `cancelRequest`).
 */
export function setCheckedHandler<S extends z.ZodType<{ method: string }>>(
  server: Server,
  method: string,
  schema: S,
  handler: (req: z.infer<S>, extra: Extra) => Promise<object>,
): void {
  const anyRequest = z.looseObject({ method: z.literal(method) });
  Protocol.prototype.setRequestHandler.call(server, anyRequest, async (req: unknown, extra: Extra) => {
    const parsed = schema.safeParse(req);
    if (!parsed.success) {
      const issue = parsed.error.issues[0] as Issue;
      throw new WireError(ErrorCode.InvalidParams, `invalid ${method} request: ${describeIssue(issue, req)}`, { code: 'usage', field: issue.path.map(String).join('.') });
    }
    return (await withOutsideCancel(server, extra, (signal) => handler(parsed.data, { ...extra, signal }))) as ServerResult;
  });
}
