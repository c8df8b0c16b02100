import type { Context, Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { z } from 'zod';
import { BerthError, isBerthError } from '../errors';
import type { RunState } from '../model';
import { entriesPage, outputPage, runsPage } from './api-v1-pages';
import type { CommitFeed } from './commit-feed';
import type { ServeDeps } from './deps';
import { AttemptTracker } from '../output';
import { apiError } from './api-errors';
import { DecideBody, ForkBody, openApiDocument, ReconcileBody, RejectBody, ROUTES, SubmitPlanBody, type Route } from './api-v1-schema';

const SETTLED: readonly RunState[] = ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'];
const KEEPALIVE_MS = 15_000;

async function body<T>(c: Context, schema: z.ZodType<T>): Promise<T> {
  const text = await c.req.text();
  let raw: unknown = {};
  // No body is an empty one; a body that is not JSON is refused, not read as empty (which named a missing field instead).
  if (text.trim() !== '') {
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new BerthError('invalid_request', `request body is not JSON: ${(err as Error).message}`);
    }
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new BerthError('invalid_request', `request body: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/**
 * `/api/v1`: the same operations as the commands, for programs on other machines
 * (`Berth.connect`). Bearer token as the pages; POSTs are JSON, which a cross-site form cannot
 * send, so they need no CSRF token. Routes come from {@link ROUTES}, as the OpenAPI document does.
 */
export function mountApiV1(app: Hono, deps: ServeDeps, feed: CommitFeed): void {
  const handlers: Record<string, (c: Context) => Promise<Response>> = {
    'get /api/v1/runs': async (c) => c.json(await runsPage(c, deps.store)),
    'get /api/v1/runs/:id/entries': async (c) => c.json(await entriesPage(c, deps.store, await runOf(c))),
    'get /api/v1/runs/:id/output': async (c) => c.json(await outputPage(c, deps.store, await runOf(c))),
    'post /api/v1/runs': async (c) => {
      if (!deps.submitPlan) throw new BerthError('not_supported', 'this server does not take submissions');
      const b = await body(c, SubmitPlanBody);
      const r = await deps.submitPlan(b.plan, { requestId: b.requestId, tags: b.tags ?? [] });
      return c.json(r, r.created ? 201 : 200);
    },
    'get /api/v1/runs/:id': async (c) => c.json({ run: await runOf(c) }),
    'get /api/v1/runs/:id/events': async (c) => runEvents(c, deps, feed, await runOf(c)),
    'post /api/v1/runs/:id/cancel': async (c) => c.json({ said: await deps.actions.cancel(id(c), deps.operator) }),
    'post /api/v1/runs/:id/approve': async (c) => {
      const b = await body(c, DecideBody);
      return c.json({ said: await deps.actions.approve(id(c), b.id, b.digest, deps.operator) });
    },
    'post /api/v1/runs/:id/deny': async (c) => c.json({ said: await deps.actions.deny(id(c), (await body(c, DecideBody)).id, deps.operator) }),
    'post /api/v1/runs/:id/reconcile': async (c) => c.json({ said: await deps.actions.reconcile(id(c), await body(c, ReconcileBody), deps.operator) }),
    'post /api/v1/runs/:id/accept': async (c) => c.json({ said: await deps.actions.judge(id(c), 'accepted', undefined, deps.operator) }),
    'post /api/v1/runs/:id/reject': async (c) => c.json({ said: await deps.actions.judge(id(c), 'rejected', (await body(c, RejectBody)).reason, deps.operator) }),
    'post /api/v1/runs/:id/fork': async (c) => c.json(await deps.actions.fork(id(c), (await body(c, ForkBody)).at, deps.operator)),
  };
  const id = (c: Context) => c.req.param('id')!;
  const runOf = async (c: Context) => {
    const run = await deps.store.getRun(id(c));
    if (!run) throw new BerthError('run_not_found', `no run ${id(c)} in ${deps.store.location}`, { ids: { runId: id(c) } });
    return run;
  };
  app.get('/api/v1/openapi.json', (c) => c.json(openApiDocument()));
  for (const r of ROUTES as Route[]) {
    const h = handlers[`${r.method} ${r.path}`];
    if (!h) throw new Error(`no handler for ${r.method} ${r.path}`);
    app[r.method](r.path, async (c) => {
      try {
        return await h(c);
      } catch (err) {
        if (isBerthError(err)) return apiError(c, err);
        throw err;
      }
    });
  }
}

/**
 * The run's commits after `Last-Event-ID` (or `?after=`), each once, with the run's state; an
 * `end` event once the run has settled and every commit up to then was sent. With `?output=1`
 * also its live output: `output` events (a stored chunk each) and `interrupted` events (an
 * attempt a crash cut off), and ids `COMMIT.OUTPUT` so a reconnect resumes both sequences.
 */
function runEvents(c: Context, deps: ServeDeps, feed: CommitFeed, run: { id: string; sessionId: string }) {
  const withOutput = c.req.query('output') === '1';
  let { after, afterOutput } = resumeBoth(c);
  const attempts = new AttemptTracker();
  const id = () => (withOutput ? `${after}.${afterOutput}` : String(after));
  return streamSSE(c, async (stream) => {
    const ctl = new AbortController();
    stream.onAbort(() => ctl.abort());
    await stream.write('retry: 500\n\n');
    while (!ctl.signal.aborted) {
      // The state first: a commit that settles the run, and output written before it, are then in the reads after it.
      const state = (await deps.store.getRun(run.id))!.state;
      // What the feed had seen before the reads is in them (or is another run's): waiting beyond it never spins on other runs' commits.
      const seen = feed.newest;
      const seenOutput = feed.newestOutput;
      const commits = await deps.store.listCommitLog({ afterSeq: after, sessionId: run.sessionId, limit: 500 });
      for (const x of commits) {
        after = x.seq;
        await stream.writeSSE({ id: id(), event: 'commit', data: JSON.stringify({ ...x, state }) });
      }
      const chunks = withOutput ? await deps.store.listOutput({ runId: run.id, afterSeq: afterOutput, limit: 500 }) : [];
      for (const x of chunks) {
        afterOutput = x.seq;
        for (const e of attempts.see(x)) await stream.writeSSE({ id: id(), event: e.type, data: JSON.stringify(e) });
      }
      if (commits.length === 500 || chunks.length === 500) continue;
      if (SETTLED.includes(state)) {
        for (const e of attempts.settle()) await stream.writeSSE({ id: id(), event: e.type, data: JSON.stringify(e) });
        await stream.writeSSE({ event: 'end', data: JSON.stringify({ state, lastSeq: after, ...(withOutput ? { lastOutputSeq: afterOutput } : {}) }) });
        return;
      }
      const moved = withOutput ? await feed.waitEitherBeyond(Math.max(after, seen), Math.max(afterOutput, seenOutput), ctl.signal, KEEPALIVE_MS) : await feed.waitBeyond(Math.max(after, seen), ctl.signal, KEEPALIVE_MS);
      if (!moved && !ctl.signal.aborted) await stream.write(': keep-alive\n\n');
    }
  });
}

/** `Last-Event-ID` (`C` or `C.O`), else `?after=C&afterOutput=O`: where both sequences resume. */
function resumeBoth(c: Context): { after: number; afterOutput: number } {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(c.req.header('last-event-id') ?? '');
  if (m) return { after: Number(m[1]), afterOutput: Number(m[2] ?? 0) };
  const n = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : 0);
  return { after: n(c.req.query('after')), afterOutput: n(c.req.query('afterOutput')) };
}
