import type { Context } from 'hono';
import { BerthError } from '../errors';
import { RUN_STATES, type RunState } from '../model';
import { dateWindow, type Store } from '../store';

/** Rows of one page of an `/api/v1` list when `limit` is not given, and the most a page may hold. */
export const PAGE_DEFAULT = 100;
export const PAGE_MAX = 500;

/** `limit`: 1..PAGE_MAX (more is refused, so a reader never mistakes a cut page for the whole). */
export function pageSize(c: Context): number {
  const raw = c.req.query('limit');
  if (raw === undefined || raw === '') return PAGE_DEFAULT;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > PAGE_MAX) throw new BerthError('invalid_request', `limit must be 1 to ${PAGE_MAX}, not ${raw.slice(0, 20)}`);
  return Number(raw);
}

/** Opaque cursors: the last row's keys, base64url JSON; a cursor that does not parse is refused. */
const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
function decode<T>(raw: string | undefined, valid: (v: unknown) => v is T): T | undefined {
  if (!raw) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    v = undefined;
  }
  if (!valid(v)) throw new BerthError('invalid_request', 'cursor is not one this API gave out');
  return v;
}
const isRunKey = (v: unknown): v is [number, string] => Array.isArray(v) && v.length === 2 && typeof v[0] === 'number' && typeof v[1] === 'string';
const isSeq = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** `GET /api/v1/runs`: oldest first, keyset-paged (a run added meanwhile never shifts a page), filtered as the runs page is. */
export async function runsPage(c: Context, store: Store) {
  const limit = pageSize(c);
  const asked = c.req.queries('state') ?? [];
  const unknown = asked.filter((s) => !(RUN_STATES as readonly string[]).includes(s));
  // A misspelt state must not widen the filter to every run.
  if (unknown.length) throw new BerthError('invalid_request', `state must be one of ${RUN_STATES.join(', ')}, not ${unknown.join(', ')}`);
  const states = asked as RunState[];
  const tags = [...new Set((c.req.queries('tag') ?? []).flatMap((t) => t.split(',')).map((t) => t.trim()).filter(Boolean))];
  const search = (c.req.query('q') ?? '').trim();
  const after = decode(c.req.query('cursor'), isRunKey);
  const { runs } = await store.listRunPage({
    ...(states.length ? { states } : {}),
    ...(tags.length ? { tags } : {}),
    ...(search ? { search: search.slice(0, 200) } : {}),
    ...dateWindow(c.req.query('from'), c.req.query('to')),
    order: 'created',
    ...(after ? { after: { createdAt: after[0], id: after[1] } } : {}),
    // One more than the page: whether another page exists is known without counting.
    limit: limit + 1,
    count: false,
  });
  const page = runs.slice(0, limit);
  const last = page.at(-1);
  return { runs: page, nextCursor: runs.length > limit && last ? encode([last.createdAt, last.id]) : null };
}

/** `GET /api/v1/runs/:id/entries`: the run's entries in commit order, paged by sequence. */
export async function entriesPage(c: Context, store: Store, run: { id: string; sessionId: string }) {
  const limit = pageSize(c);
  const after = decode(c.req.query('cursor'), isSeq) ?? 0;
  const rows = await store.listEntries(run.sessionId, { runId: run.id, afterSeq: after, limit: limit + 1 });
  const page = rows.slice(0, limit);
  return { entries: page, nextCursor: rows.length > limit ? encode(page.at(-1)!.seq) : null };
}

/** `GET /api/v1/runs/:id/output`: the run's stored output chunks in output order, paged by sequence. */
export async function outputPage(c: Context, store: Store, run: { id: string }) {
  const limit = pageSize(c);
  const after = decode(c.req.query('cursor'), isSeq) ?? 0;
  const rows = await store.listOutput({ runId: run.id, afterSeq: after, limit: limit + 1 });
  const page = rows.slice(0, limit);
  return { chunks: page, nextCursor: rows.length > limit ? encode(page.at(-1)!.seq) : null };
}
