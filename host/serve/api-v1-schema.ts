import { z } from 'zod';
import { RUN_STATES } from '../model';

/**
 * The versioned JSON API's shapes (`/api/v1`): the one source for request validation, for the
 * OpenAPI document (`/api/v1/openapi.json`, generated from these) and for the remote client.
 */
export const RunSchema = z
  .object({
    id: z.string(),
    sessionId: z.string(),
    submissionId: z.string().nullable(),
    kind: z.string(),
    state: z.enum(RUN_STATES),
    rootTaskId: z.string().nullable(),
    transitionCount: z.number().int(),
    versions: z.record(z.string(), z.unknown()),
    createdAt: z.number(),
    updatedAt: z.number(),
  });

export const ErrorSchema = z
  .object({ error: z.object({ code: z.string(), message: z.string(), retryable: z.boolean(), ids: z.record(z.string(), z.string()).optional() }) });

export const SubmitPlanBody = z.strictObject({
  /** A plan file on the server's file system (as `berth run PLAN --detach` there). */
  plan: z.string().min(1),
  requestId: z.string().min(1).optional(),
  tags: z.array(z.string()).optional(),
});
export const Submitted = z.object({ run: RunSchema, created: z.boolean() });
const Cursor = z.string().nullable().describe('pass as `cursor` for the next page; null on the last page');
export const ListedRunSchema = RunSchema.extend({ name: z.string().nullable(), tags: z.array(z.string()) });
export const RunList = z.object({ runs: z.array(ListedRunSchema), nextCursor: Cursor });
export const EntrySchema = z.object({ id: z.string(), sessionId: z.string(), seq: z.number().int(), conversationId: z.string().nullable(), runId: z.string().nullable(), taskId: z.string().nullable(), kind: z.string(), body: z.unknown(), commitSeq: z.number().int(), at: z.number() });
export const EntryList = z.object({ entries: z.array(EntrySchema), nextCursor: Cursor });
export const OutputChunkSchema = z.object({ seq: z.number().int(), runId: z.string(), source: z.string(), label: z.string(), attempt: z.string(), n: z.number().int(), channel: z.enum(['stdout', 'stderr', 'end']), at: z.number(), text: z.string(), cutBytes: z.number().int() });
export const OutputList = z.object({ chunks: z.array(OutputChunkSchema), nextCursor: Cursor });
export const RunOne = z.object({ run: RunSchema });
export const Said = z.object({ said: z.string(), forkRunId: z.string().nullable().optional() });
export const DecideBody = z.strictObject({ id: z.string().min(1), digest: z.string().optional() });
export const ReconcileBody = z.strictObject({ accept: z.boolean().optional(), rejectEffect: z.boolean().optional(), restore: z.string().optional(), fail: z.boolean().optional(), verify: z.boolean().optional() });
export const RejectBody = z.strictObject({ reason: z.string().min(1) });
export const ForkBody = z.strictObject({ at: z.string().min(1) });
export const Empty = z.strictObject({});
/** One `commit` event of a run's stream: the store-wide sequence is also the SSE id. */
export const CommitEventSchema = z
  .object({ seq: z.number().int(), sessionId: z.string(), sessionSeq: z.number().int(), at: z.number(), label: z.string(), actor: z.string(), state: z.enum(RUN_STATES) });

/** Every route of the API: what the server registers and what the OpenAPI document lists, from one table. */
export interface Route {
  method: 'get' | 'post';
  /** Hono syntax (`:id`); the document writes `{id}`. */
  path: string;
  summary: string;
  body?: z.ZodType;
  response: z.ZodType | 'sse';
  ok: 200 | 201;
}

export const ROUTES: Route[] = [
  { method: 'get', path: '/api/v1/runs', summary: 'List runs, oldest first, a page at a time (`limit` 1-500, default 100; `cursor` from the last page); filters `state=` and `tag=` (repeatable; every tag), `q=` (run id or name), `from=`/`to=` (a day YYYY-MM-DD, inclusive, or an ISO time)', response: RunList, ok: 200 },
  { method: 'post', path: '/api/v1/runs', summary: 'Submit a plan run for a worker (the same requestId is the same run)', body: SubmitPlanBody, response: Submitted, ok: 201 },
  { method: 'get', path: '/api/v1/runs/:id', summary: 'One run', response: RunOne, ok: 200 },
  { method: 'get', path: '/api/v1/runs/:id/entries', summary: "The run's entries in commit order, a page at a time (`limit` 1-500, `cursor`)", response: EntryList, ok: 200 },
  { method: 'get', path: '/api/v1/runs/:id/output', summary: "The run's stored output chunks (steps and tool calls) in output order, a page at a time (`limit` 1-500, `cursor`)", response: OutputList, ok: 200 },
  { method: 'get', path: '/api/v1/runs/:id/events', summary: "The run's commits as server-sent events (`commit`, id = store-wide sequence; `Last-Event-ID` or `?after=` resumes; an `end` event once the run settled). With `?output=1` also its live output (`output`: a stored chunk; `interrupted`: an attempt a crash cut off) and ids `COMMIT.OUTPUT`", response: 'sse', ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/cancel', summary: 'Cancel the run', body: Empty, response: Said, ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/approve', summary: 'Approve a tool call waiting for approval', body: DecideBody, response: Said, ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/deny', summary: 'Deny a tool call waiting for approval', body: DecideBody, response: Said, ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/reconcile', summary: 'Decide a run in needs_reconciliation', body: ReconcileBody, response: Said, ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/accept', summary: "Accept a completed run's outcome", body: Empty, response: Said, ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/reject', summary: "Reject a completed run's outcome", body: RejectBody, response: Said, ok: 200 },
  { method: 'post', path: '/api/v1/runs/:id/fork', summary: 'Fork the run from a checkpoint (a step or a snapshot id)', body: ForkBody, response: Said, ok: 200 },
];

/** A schema inlined for the document (no `$schema`, no `$defs` whose `#` would point at the document root). */
const schema = (t: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(t, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any', reused: 'inline' }) as Record<string, unknown>;
  return rest;
};

/** The OpenAPI 3.1 document of {@link ROUTES}, generated from their zod schemas. */
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of ROUTES) {
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    const params = [...r.path.matchAll(/:(\w+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const ok = r.response === 'sse' ? { description: 'text/event-stream', content: { 'text/event-stream': { schema: schema(CommitEventSchema) } } } : { description: 'done', content: { 'application/json': { schema: schema(r.response) } } };
    const error = { description: 'a typed error (code, message, retryable)', content: { 'application/json': { schema: schema(ErrorSchema) } } };
    paths[path] = {
      ...paths[path],
      [r.method]: {
        operationId: `${r.method}${path.replace(/[{}]/g, '').split('/').filter(Boolean).slice(2).map((p) => p[0]!.toUpperCase() + p.slice(1)).join('')}`,
        summary: r.summary,
        ...(params.length ? { parameters: params } : {}),
        ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: schema(r.body) } } } } : {}),
        responses: { [String(r.ok)]: ok, '400': error, '401': error, '404': error, '409': error },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Berth host API', version: '1' },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    security: [{ bearer: [] }],
    paths,
  };
}
