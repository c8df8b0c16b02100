import { builtinTools, snapshot, toolSchema, type AnyTool } from '../../tools';

/** Arguments every session tool takes besides its own: which session, and the call's idempotency key. */
const SESSION_PROPS = {
  session: { type: 'string', description: 'The Berth session to work in; default: the one this server was started with or created on the first call (returned in every result)' },
  call_id: {
    type: 'string',
    description: 'Idempotency key of this call: repeating a call with the same call_id (e.g. after a reconnect) returns the first outcome and never runs it twice',
  },
} as const;

export interface McpToolListing {
  name: string;
  description: string;
  inputSchema: { type: 'object'; properties?: Record<string, unknown>; required?: string[]; [k: string]: unknown };
}

/** What an MCP client calls in the sandbox: the built-in agent's tools and `snapshot`, each one durable call of the session. */
const SANDBOX_TOOLS: readonly AnyTool[] = [...builtinTools, snapshot];

/** The sandbox tools as MCP tools: the same zod schemas (as JSON Schema), plus `session` and `call_id`. */
export function sandboxTools(): McpToolListing[] {
  return SANDBOX_TOOLS.map((t) => {
    const p = toolSchema(t).function.parameters as McpToolListing['inputSchema'];
    return { name: t.name, description: t.description, inputSchema: { ...p, type: 'object', properties: { ...(p.properties ?? {}), ...SESSION_PROPS } } };
  });
}

export const SANDBOX_TOOL_NAMES: ReadonlySet<string> = new Set(SANDBOX_TOOLS.map((t) => t.name));

/** Tools about the session itself rather than its sandbox. */
export const SESSION_TOOLS: McpToolListing[] = [
  {
    name: 'status',
    description: 'The session: its id, the calls made in it with their outcome (ok, error, uncertain, ...), and a call that awaits a reconcile decision',
    inputSchema: { type: 'object', properties: { session: SESSION_PROPS.session }, additionalProperties: false },
  },
  {
    name: 'reconcile',
    description:
      'Decide a call whose effect is uncertain (the server stopped while it ran and it may not be repeated): accept = it took effect (or its state is fine as it is), fail = end that call as failed, its effect left uncertain (it may or may not have happened; it never runs again). The session then takes calls again',
    inputSchema: { type: 'object', properties: { session: SESSION_PROPS.session, decision: { type: 'string', enum: ['accept', 'fail'] } }, required: ['decision'], additionalProperties: false },
  },
  {
    name: 'fork',
    description:
      'A new session as this one was after its N-th call (conversation and workspace, from the snapshot of that call; needs snapshot policy after-each-step). Returns the new session id: pass it as `session` to work in the fork',
    inputSchema: {
      type: 'object',
      properties: { session: SESSION_PROPS.session, after_call: { type: 'integer', minimum: 1, description: "How many of the session's calls the fork keeps (1 = after the first call)" } },
      required: ['after_call'],
      additionalProperties: false,
    },
  },
];
