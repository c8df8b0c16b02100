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
  limit: number;
  offset?: number;
}

/** A run with the name its session recorded: the plan's name, or the agent task's text. */
export interface ListedRun extends Run {
  name: string | null;
}

/** Runs waiting for a person first, then newest first (the runs page's order), one page at a time. */
export interface RunListReads {
  listRunPage(q: RunListQuery): Promise<{ runs: ListedRun[]; total: number }>;
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

/** `%text%` for LIKE, with the pattern characters of the text escaped (`\` is the escape). */
export const likePattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
