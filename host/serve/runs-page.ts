import { acceptanceOf, type AcceptanceView } from '../acceptance';
import { costOfRun, type RunCost } from '../cost';
import { RUN_STATES, type Run, type RunState } from '../model';
import { calendarDayStart, type RunListQuery } from '../store';
import type { ServeDeps } from './deps';
import { html, nameText, type SafeHtml } from './html';
import { duration, stateBadge, when } from './layout';

/** States that wait for a person: listed first. */
export const NEEDS_A_PERSON: readonly RunState[] = ['awaiting_approval', 'needs_reconciliation'];
const FINAL: readonly RunState[] = ['completed', 'failed', 'cancelled'];
/** Runs per page of the list. */
export const RUNS_PAGE = 50;

/** One row of the runs list; also an item of `GET /api/runs`. */
export interface RunRow {
  run: Run;
  /** The plan's name, or the first line of the agent task. */
  name: string | null;
  /** The tags it was submitted with. */
  tags: string[];
  owner: string;
  needsPerson: boolean;
  durationMs: number;
  acceptance: AcceptanceView;
  cost: RunCost;
}

/** What the list shows: state, search text, creation day window, page. Read from the query string. */
export interface RunsFilter {
  states: RunState[];
  search: string;
  /** Runs submitted with every one of these tags. */
  tags: string[];
  /** `YYYY-MM-DD` (UTC), inclusive. */
  from: string;
  to: string;
  page: number;
  /** What the query string asked that the list cannot apply, said above the list (never dropped silently). */
  ignored?: string[];
}

const isRunState = (s: string): s is RunState => (RUN_STATES as readonly string[]).includes(s);


/**
 * The list's filter from a query string's values. An unknown state or a day that is not a
 * calendar day (YYYY-MM-DD) is not applied and is named in `ignored`: a hand-edited URL that
 * silently showed every run would read as "these runs match".
 */
export function runsFilterOf(q: { states: string[]; search?: string; tags: string[]; from?: string; to?: string; page?: number }): RunsFilter {
  const ignored: string[] = [];
  const states = q.states.filter((s) => s !== '');
  const unknown = states.filter((s) => !isRunState(s));
  if (unknown.length) ignored.push(`state ${unknown.map((s) => JSON.stringify(s)).join(', ')}: not a run state (${RUN_STATES.join(', ')})`);
  const day = (name: 'from' | 'to') => {
    const v = (q[name] ?? '').trim();
    if (v && calendarDayStart(v) === undefined) ignored.push(`${name} ${JSON.stringify(v.slice(0, 40))}: not a day (YYYY-MM-DD)`);
    return v;
  };
  return { states: states.filter(isRunState), search: (q.search ?? '').trim().slice(0, 200), tags: q.tags, from: day('from'), to: day('to'), page: q.page ?? 1, ...(ignored.length ? { ignored } : {}) };
}

export function listQuery(f: RunsFilter, extra: Partial<RunListQuery> = {}): RunListQuery {
  const from = calendarDayStart(f.from);
  const to = calendarDayStart(f.to);
  return {
    ...(f.states.length ? { states: f.states } : {}),
    ...(f.search ? { search: f.search } : {}),
    ...(f.tags.length ? { tags: f.tags } : {}),
    ...(from !== undefined && !Number.isNaN(from) ? { createdFrom: from } : {}),
    ...(to !== undefined && !Number.isNaN(to) ? { createdTo: to + 86_400_000 } : {}),
    limit: RUNS_PAGE,
    offset: (Math.max(1, f.page) - 1) * RUNS_PAGE,
    ...extra,
  };
}

/** One page of runs (those needing a person first, then newest first), with the count of all that match. */
export async function readRuns(deps: ServeDeps, q: RunListQuery): Promise<{ rows: RunRow[]; total: number }> {
  const { runs, total } = await deps.store.listRunPage(q);
  const now = (deps.now ?? Date.now)();
  // One read of the cost samples for the page's runs, not one per row.
  const samples = runs.length ? await deps.store.sumCost({ runIds: runs.map((r) => r.id) }) : [];
  const rows = await Promise.all(
    runs.map(async ({ name, tags, ...run }) => ({
      run,
      name,
      tags,
      owner: await deps.ownerLine(run),
      needsPerson: NEEDS_A_PERSON.includes(run.state),
      durationMs: (FINAL.includes(run.state) ? run.updatedAt : now) - run.createdAt,
      acceptance: await acceptanceOf(deps.store, run),
      cost: await costOfRun(deps.store, run, samples, now),
    })),
  );
  return { rows, total };
}

const STATES: readonly RunState[] = ['awaiting_approval', 'needs_reconciliation', 'running', 'completed', 'failed', 'cancelled'];

/** The query string of a filter (and page), for links and the live part's row requests. */
export function filterQuery(f: RunsFilter, page = f.page): string {
  const p = new URLSearchParams();
  for (const s of f.states) p.append('state', s);
  if (f.search) p.set('q', f.search);
  for (const t of f.tags) p.append('tag', t);
  if (f.from) p.set('from', f.from);
  if (f.to) p.set('to', f.to);
  if (page > 1) p.set('page', String(page));
  return p.toString();
}

/** One run's row: the live list replaces it by `data-run` when a commit of its session lands. */
export function runRow(r: RunRow): SafeHtml {
  return html`<tr class="${r.needsPerson ? 'attention' : ''}" data-run="${r.run.id}" data-session="${r.run.sessionId}" data-created="${r.run.createdAt}"><td><a href="/runs/${r.run.id}">${r.name ? nameText(r.name) : r.run.id}</a>${r.name ? html`<br><code class="muted">${r.run.id}</code>` : ''}${r.tags.map((t) => html` <span class="tag">${nameText(t)}</span>`)}</td><td>${r.run.kind}</td><td>${stateBadge(r.run.state)}</td><td>${r.owner}</td><td>${when(r.run.createdAt)}</td><td>${duration(r.durationMs)}</td><td class="acceptance">${r.acceptance.state === 'none' ? '—' : r.acceptance.state}</td><td class="cost">${costLine(r.cost)}</td></tr>`;
}

/** The filter form: a search box, a state choice and a creation window (a GET form: the filter is the URL). */
function filterForm(f: RunsFilter): SafeHtml {
  return html`<form id="filter" method="get" action="/"><input type="search" name="q" value="${f.search}" placeholder="search run id or name"> <input type="text" name="tag" value="${f.tags.join(',')}" placeholder="tag"> <select name="state"><option value="">every state</option>${STATES.map(
    (s) => html`<option value="${s}"${f.states.includes(s) ? html` selected` : ''}>${s}</option>`,
  )}</select> from <input type="date" name="from" value="${f.from}"> to <input type="date" name="to" value="${f.to}"> <button type="submit">filter</button> <a href="/">clear</a></form>`;
}

/** The runs list (the live part of `/`): filter, one page of rows, paging links. */
export function runsFragment(list: { rows: RunRow[]; total: number }, f: RunsFilter): SafeHtml {
  const pages = Math.max(1, Math.ceil(list.total / RUNS_PAGE));
  const page = Math.min(Math.max(1, f.page), pages);
  const nav = html`<p id="pages">${list.total} run${list.total === 1 ? '' : 's'} · page ${page} of ${pages}${page > 1 ? html` · <a id="prev" href="/?${filterQuery(f, page - 1)}">newer</a>` : ''}${page < pages ? html` · <a id="next" href="/?${filterQuery(f, page + 1)}">older</a>` : ''}</p>`;
  const filtered = f.states.length || f.search || f.tags.length || f.from || f.to;
  const notice = f.ignored?.length ? html`<p id="filter-ignored" class="notice">not applied: ${f.ignored.join('; ')}</p>` : '';
  return html`<section><h2>Runs</h2>${filterForm(f)}${notice}${nav}
${list.rows.length === 0
    ? html`<p class="muted">no runs${filtered ? ' match this filter' : ''}</p>`
    : html`<table id="runs"><thead><tr><th>run</th><th>kind</th><th>state</th><th>host / owner</th><th>started</th><th>duration</th><th>acceptance</th><th>cost</th></tr></thead><tbody>
${list.rows.map(runRow)}</tbody></table>`}</section>`;
}

/** The runs list's cost cell: tokens, sandbox CPU and lease time. */
export function costLine(c: RunCost): string {
  const tokens = Object.values(c.tokens).reduce((n, t) => n + t.prompt + t.completion, 0);
  return `${tokens ? `${tokens} tokens · ` : ''}${c.cpuSeconds.toFixed(2)} CPU-s · lease ${c.leaseSeconds.toFixed(0)} s`;
}
