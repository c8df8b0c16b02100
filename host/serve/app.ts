import { hostname } from 'node:os';
import { Hono, type Context } from 'hono';
import { isBerthError } from '../errors';
import { LIVE_JS, STYLE_CSS } from './assets';
import { csrfToken, requireCsrf, requireToken } from './auth';
import type { CommitFeed } from './commit-feed';
import type { ReconcileRequest, ServeDeps } from './deps';
import { commitEvents } from './events';
import { outputEvents } from './output-events';
import { diffFragment, readSnapshotDiff } from './snapshot-diff';
import { layout } from './layout';
import { runFragment } from './run-page';
import { readRunView } from './run-view';
import { filterQuery, listQuery, readRuns, runRow, runsFilterOf, runsFragment, type RunsFilter } from './runs-page';
import { html } from './html';
import { downloadArtifact } from './artifact-download';
import { requireHost } from './host-check';
import { refuseCrossSiteLoads } from './fetch-site';
import { limitBodies } from './body-limit';
import { mountApiV1 } from './api-v1';
import { metricsText } from './metrics';
import { pageRefusal } from './reconcile-refusals';
import { apiError, isApiPath, refusal } from './api-errors';
import { runNotFound } from '../store';
import { saidNotes } from './said-note';

/** `tag=a&tag=b` or `tag=a,b` (the form's one box): at most 10 tags. */
export const tagsOf = (raw: string[] | undefined) => [...new Set((raw ?? []).flatMap((t) => t.split(',')).map((t) => t.trim()).filter(Boolean))].slice(0, 10);
const positive = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : undefined);
/**
 * Past any list a store can hold, and small enough that page × limit stays a whole number SQLite
 * takes as an OFFSET: `?page=99999999999999999999` made one past the int64 range, a 500 (datatype mismatch).
 */
const MAX_PAGE = 1_000_000_000;

/**
 * The HTTP app: pages, their live fragments, the JSON API, the event streams and the actions.
 * `hosts` are the Host header values it answers (host-check.ts); `url` is what a refusal names.
 */
export function serveApp(deps: ServeDeps, feed: CommitFeed, hosts: { allowed: () => ReadonlySet<string>; url: () => string }): Hono {
  const app = new Hono();
  // CSRF is derived from the token; without a token (loopback, --no-token) from a per-process secret.
  const secret = deps.token ?? crypto.randomUUID() + crypto.randomUUID();
  const csrf = csrfToken(secret);
  const notes = saidNotes(secret);
  app.use('*', async (c, next) => {
    await next();
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'no-referrer');
    // Every answer but the two assets shows a run (output, file names, receipts): no browser disk
    // cache or proxy keeps it after the tab closes (an event stream's no-cache still allowed storing).
    if (!new URL(c.req.url).pathname.startsWith('/assets/')) c.header('Cache-Control', 'no-store');
    // frame-ancestors below is the CSP spelling; this one is for what reads no CSP (and the event streams, which send none).
    c.header('X-Frame-Options', 'DENY');
    // Only this origin's own script and style: an injected inline <script> would not run anyway.
    if (!c.res.headers.get('content-type')?.startsWith('text/event-stream')) c.header('Content-Security-Policy', "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'");
  });
  // Host first: a rebound name gets nothing, in every mode (with a token the cookie is this origin's, but --no-token has none).
  app.use('*', requireHost(hosts.allowed, hosts.url));
  // Before the token: a page of another site gets no work done by loading our URLs (fetch-site.ts).
  app.use('*', refuseCrossSiteLoads());
  // Before the token: the sign-in form's POST is read before any cookie exists.
  app.use('*', limitBodies());
  app.use('*', requireToken(deps.token));
  app.use('*', requireCsrf(secret));
  // The versioned API for programs (Berth.connect): JSON in and out, typed errors.
  mountApiV1(app, deps, feed);

  app.get('/assets/live.js', (c) => c.body(LIVE_JS, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' }));
  app.get('/assets/style.css', (c) => c.body(STYLE_CSS, 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'no-cache' }));

  const runOf = async (c: Context) => {
    const run = await deps.store.getRun(c.req.param('id')!);
    if (!run) throw await runNotFound(deps.store, c.req.param('id')!);
    return run;
  };
  const filterOf = (c: Context): RunsFilter =>
    runsFilterOf({ states: c.req.queries('state') ?? [], search: c.req.query('q'), tags: tagsOf(c.req.queries('tag')), from: c.req.query('from'), to: c.req.query('to'), page: Math.min(positive(c.req.query('page')) ?? 1, MAX_PAGE) });
  app.get('/', async (c) => {
    const f = filterOf(c);
    const after = await deps.store.lastCommitLogSeq();
    const body = runsFragment(await readRuns(deps, listQuery(f)), f);
    if (c.req.query('fragment')) return c.html(body.value);
    const q = filterQuery(f);
    // Rows, not the list, follow the commits: each commit costs its session's rows (runs-rows below).
    return c.html(layout('runs', body, { events: '/api/events', fragment: `/?fragment=1${q ? `&${q}` : ''}`, after, rows: `/runs-rows?${q}` }).value);
  });
  // The rows of the runs of some sessions that match the list's filter: what a commit changed in an open list.
  app.get('/runs-rows', async (c) => {
    const sessions = (c.req.queries('session') ?? []).slice(0, 100);
    const f = filterOf(c);
    const { rows } = await readRuns(deps, listQuery(f, { sessionIds: sessions, limit: 200, offset: 0 }));
    return c.html(html`<table><tbody>${rows.map(runRow)}</tbody></table>`.value);
  });
  app.get('/runs/:id', async (c) => {
    const id = c.req.param('id');
    const before = positive(c.req.query('before'));
    const view = await readRunView(deps, id, before);
    const body = runFragment(view, csrf);
    if (c.req.query('fragment')) return c.html(body.value);
    // An older page is a fixed view; the newest page follows the run.
    const live = before === undefined ? { events: `/api/runs/${encodeURIComponent(id)}/events`, fragment: `/runs/${encodeURIComponent(id)}?fragment=1`, after: view.commitSeq } : undefined;
    // What the action just taken said (signed: a link from another site shows nothing), and after
    // "fork from here" a link to the new run.
    const note = notes.read({ said: c.req.query('said'), forked: c.req.query('forked'), sig: c.req.query('sig') });
    const forked = note?.forked;
    const link = forked && /^[A-Za-z0-9_-]+$/.test(forked) ? { href: `/runs/${forked}`, text: `open run ${forked}` } : undefined;
    return c.html(layout(`run ${id}`, body, live, note?.said, link).value);
  });

  // What changed in the workspace between two snapshots of the run, from their manifests (no sandbox).
  app.get('/runs/:id/diff', async (c) => {
    const id = c.req.param('id');
    const d = await readSnapshotDiff(deps.store, id, c.req.query('from') ?? '', c.req.query('to') ?? '', { files: deps.readImageFiles, signal: c.req.raw.signal });
    return c.html(layout(`diff of run ${id}`, diffFragment(id, d)).value, 'refused' in d ? 404 : 200);
  });

  // Prometheus text format; behind the same token as the rest (a scraper sends Authorization: Bearer).
  app.get('/metrics', async (c) => c.body(await metricsText(deps.store, process.env.BERTH_HOST_ID ?? hostname()), 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }));
  app.get('/api/runs', async (c) => {
    const f = filterOf(c);
    const limit = Math.min(positive(c.req.query('limit')) ?? 50, 1000);
    const { rows, total } = await readRuns(deps, listQuery(f, { limit, offset: (f.page - 1) * limit }));
    return c.json({ runs: rows, total });
  });
  app.get('/api/runs/:id', async (c) => c.json(await readRunView(deps, c.req.param('id'), positive(c.req.query('before')))));
  app.get('/api/runs/:id/events', async (c) => commitEvents(c, deps.store, feed, (await runOf(c)).sessionId));
  app.get('/api/events', (c) => commitEvents(c, deps.store, feed, undefined));
  // A run's live output, chunk by chunk, while its steps and tool calls run.
  app.get('/api/runs/:id/output', async (c) => outputEvents(c, deps.store, feed, (await runOf(c)).id));

  // Actions: POST + CSRF (checked above); each calls the CLI's own code path with the operator as actor.
  const act = (name: string, run: (c: Context, form: Record<string, string>) => Promise<string | { said: string; forkRunId: string | null }>) =>
    app.post(`/runs/:id/${name}`, async (c) => {
      const form = Object.fromEntries(Object.entries(await c.req.parseBody()).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
      let said: string;
      let forked: string | null = null;
      let status = 200;
      try {
        const r = await run(c, form);
        said = typeof r === 'string' ? r : r.said;
        forked = typeof r === 'string' ? null : r.forkRunId;
      } catch (err) {
        if (!isBerthError(err)) throw err;
        said = `${err.code}: ${err.message}`;
        // A run or approval that is not there is not a conflict with its state: a program tells them apart by status, as in /api/v1.
        status = err.code.endsWith('not_found') ? 404 : 409;
      }
      if (c.req.header('accept')?.includes('application/json')) return c.json(forked ? { said, forkRunId: forked } : { said }, status as 200);
      return c.redirect(`/runs/${encodeURIComponent(c.req.param('id'))}?${notes.query({ said, forked })}`, 303);
    });
  act('approve', (c, f) => deps.actions.approve(c.req.param('id')!, f.id ?? '', f.digest || undefined, deps.operator));
  act('deny', (c, f) => deps.actions.deny(c.req.param('id')!, f.id ?? '', deps.operator));
  act('cancel', (c) => deps.actions.cancel(c.req.param('id')!, deps.operator));
  act('reconcile', (c, f) => {
    const choice: ReconcileRequest = { accept: f.answer === 'accept', rejectEffect: f.answer === 'reject-effect', restore: f.restore || undefined, fail: f.fail === '1', verify: f.verify === '1' };
    return deps.actions.reconcile(c.req.param('id')!, choice, deps.operator).catch((err: unknown) => {
      throw pageRefusal(err);
    });
  });

  act('accept', (c) => deps.actions.judge(c.req.param('id')!, 'accepted', undefined, deps.operator));
  act('reject', (c, f) => deps.actions.judge(c.req.param('id')!, 'rejected', f.reason, deps.operator));
  act('fork', (c, f) => deps.actions.fork(c.req.param('id')!, f.at ?? '', deps.operator));

  // An artifact's bytes, streamed from the artifact store and hashed on the way (artifact-download.ts).
  app.get('/runs/:id/artifacts/:artifactId', (c) => downloadArtifact(c, deps, c.req.param('id'), c.req.param('artifactId')));

  app.notFound((c) => refusal(c, 404, 'not_found', `no route ${c.req.method} ${new URL(c.req.url).pathname}`));
  app.onError((err, c) => {
    if (isBerthError(err)) return isApiPath(c) ? apiError(c, err) : c.text(`${err.code}: ${err.message}`, err.code.endsWith('not_found') ? 404 : 400);
    deps.logError?.(err);
    return refusal(c, 500, 'internal', 'internal error (see the server log)');
  });
  return app;
}
