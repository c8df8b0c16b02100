import { BerthError } from '../errors';
import type { Run, RunState } from '../model';

/** What a runs list asks for: states, a search over run id and name, a creation window, one page. */
export interface RunListQuery {
  states?: RunState[];
  /** Case-insensitive substring of the run id or its name (plan name, agent task). */
  search?: string;
  createdFrom?: number;
  createdTo?: number;
  /** Only the runs of these sessions (a list page refreshing the rows a commit touched). */
  sessionIds?: string[];
  /** Only runs submitted with every one of these tags (`--detach --tags`, kept in the session's meta). */
  tags?: string[];
  limit: number;
  offset?: number;
  /**
   * `attention` (default): waiting for a person first, then newest first (the runs page).
   * `created`: oldest first by creation, paged by `after` (a keyset cursor: stable while runs are added).
   */
  order?: 'attention' | 'created';
  /** With `order: 'created'`: the runs after this one. */
  after?: { createdAt: number; id: string };
  /** Count every match (default true); a cursor-paged reader needs no count. */
  count?: boolean;
}

/** A run with the name its session recorded: the plan's name, or the agent task's text. */
export interface ListedRun extends Run {
  name: string | null;
  /** The tags it was submitted with (none: empty). */
  tags: string[];
}

/** Runs waiting for a person first, then newest first (the runs page's order), one page at a time. */
export interface RunListReads {
  listRunPage(q: RunListQuery): Promise<{ runs: ListedRun[]; total: number }>;
  /** How many runs are in each state (a state no run is in is absent): one aggregate read, whatever the store holds. */
  countRunsByState(): Promise<Partial<Record<RunState, number>>>;
}

/** States listed first: they wait for a person. */
export const FIRST_STATES: readonly RunState[] = ['awaiting_approval', 'needs_reconciliation'];

/** A name from a session's meta: the plan's name, else the first line of the agent task. */
export function nameFromMeta(meta: unknown): string | null {
  if (!meta || typeof meta !== 'object') return null;
  const m = meta as { name?: unknown; task?: unknown; plan?: unknown };
  if (typeof m.name === 'string' && m.name) return m.name;
  if (typeof m.task === 'string' && m.task) return m.task.split('\n', 1)[0]!.slice(0, 120);
  return null;
}

/** The tags of a session's meta. */
export function tagsFromMeta(meta: unknown): string[] {
  const t = meta && typeof meta === 'object' ? (meta as { tags?: unknown }).tags : undefined;
  return Array.isArray(t) ? t.filter((x): x is string => typeof x === 'string') : [];
}

/** `%text%` for LIKE, with the pattern characters of the text escaped (`\` is the escape). */
export const likePattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The start (UTC) of a calendar day written `YYYY-MM-DD`; undefined for anything else, and for a
 * day the calendar does not have: `Date.parse` reads 2026-02-30 as March 2.
 */
export function calendarDayStart(d: string): number | undefined {
  if (!DAY.test(d)) return undefined;
  const ms = Date.parse(`${d}T00:00:00Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === d ? ms : undefined;
}

/**
 * A creation window from `from`/`to`: a day (`YYYY-MM-DD`, UTC, both inclusive) or an ISO time
 * (exact; `to` exclusive). Anything else is refused, never read as "no filter" or as another day.
 * `prefix` goes before the names in the refusal (`--` for the CLI's flags).
 */
export function dateWindow(from: string | undefined, to: string | undefined, prefix = ''): Pick<RunListQuery, 'createdFrom' | 'createdTo'> {
  const at = (v: string, name: string, end: boolean) => {
    const day = calendarDayStart(v.slice(0, 10));
    const t = day === undefined ? NaN : v.length === 10 ? day + (end ? 86_400_000 : 0) : v[10] === 'T' ? Date.parse(v) : NaN;
    if (Number.isNaN(t)) throw new BerthError('invalid_request', `${prefix}${name} must be a day (YYYY-MM-DD) or an ISO time, not ${v.slice(0, 40)}`);
    return t;
  };
  return { ...(from ? { createdFrom: at(from, 'from', false) } : {}), ...(to ? { createdTo: at(to, 'to', true) } : {}) };
}
