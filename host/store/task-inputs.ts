type Row = Record<string, unknown>;

/** A task's input longer than this (UTF-8 bytes) is left out of the rows a read answers and supplied from {@link TaskInputs}. */
export const INLINE_INPUT_BYTES = 8192;

/**
 * The columns a task read (and a task update's RETURNING) answers: every column of `tasks`, with
 * `input_json` NULL when it is longer than {@link INLINE_INPUT_BYTES} (the column is NOT NULL, so
 * NULL means "left out"). `octet_length`, not `length`: both engines know a value's size without
 * reading it (SQLite from the record header, not the overflow pages; PostgreSQL without detoasting),
 * where `length` counts characters through the whole text. A plan root's input holds the whole plan (391 KB at 3,000 steps) and the
 * scheduler's reads and the root's checkpoint commits answered it about seven times a step: ~0.75 MB
 * of large strings a step that only the next full collection freed, most of a long run's memory
 * swing (bench/RESULTS.md, session 16). Same text for SQLite and PostgreSQL.
 */
export const TASK_READ_COLUMNS = [
  'id', 'session_id', 'run_id', 'parent_id', 'kind', 'kind_version', 'status', 'phase', 'checkpoint_json',
  `CASE WHEN octet_length(input_json) <= ${INLINE_INPUT_BYTES} THEN input_json END AS input_json`,
  'attempts', 'restarts', 'wait_json', 'wake_at', 'outcome', 'result_json', 'error_json', 'cancel_requested',
  'blocked_reason', 'version', 'created_at', 'updated_at',
].join(', ');

/**
 * The large inputs of tasks this store read, kept as the stored text: a task's input never changes
 * once the task is created (no commit writes `input_json` again), so a row read later gets the same
 * string instead of a fresh copy from the database. Bounded by total characters, least recently
 * used out first; what is not kept is read by id, all of a read's missing rows in one query.
 */
export class TaskInputs {
  private readonly kept = new Map<string, string>();
  private chars = 0;

  constructor(private readonly maxChars = 32 * 1024 * 1024) {}

  /** Fills the rows' left-out inputs (in place) from the cache or `fetch`, which reads `id, input_json` of the ids it is given. */
  fill<R extends Row[]>(rows: R, fetch: (ids: string[]) => Row[]): R {
    const ids = this.fromCache(rows);
    return ids.length ? this.fromFetched(rows, fetch(ids)) : rows;
  }

  /** {@link fill} with a fetch that answers asynchronously (PostgreSQL). */
  async fillAsync<R extends Row[]>(rows: R, fetch: (ids: string[]) => Promise<Row[]>): Promise<R> {
    const ids = this.fromCache(rows);
    return ids.length ? this.fromFetched(rows, await fetch(ids)) : rows;
  }

  /** The ids still missing after the cache filled what it holds. */
  private fromCache(rows: Row[]): string[] {
    const missing: string[] = [];
    for (const r of rows) {
      if (r.input_json !== null) continue;
      const id = r.id as string;
      const text = this.kept.get(id);
      if (text === undefined) {
        missing.push(id);
        continue;
      }
      this.kept.delete(id);
      this.kept.set(id, text);
      r.input_json = text;
    }
    return missing;
  }

  private fromFetched<R extends Row[]>(rows: R, fetched: Row[]): R {
    const byId = new Map(fetched.map((f) => [f.id as string, f.input_json as string]));
    for (const r of rows) {
      if (r.input_json !== null) continue;
      const text = byId.get(r.id as string);
      // Tasks are never deleted: a row read a moment ago whose input is gone is a broken store.
      if (typeof text !== 'string') throw new Error(`task ${String(r.id)}: its input could not be read back`);
      r.input_json = text;
      this.keep(r.id as string, text);
    }
    return rows;
  }

  private keep(id: string, text: string): void {
    if (text.length > this.maxChars || this.kept.has(id)) return;
    this.kept.set(id, text);
    this.chars += text.length;
    for (const [oldest, t] of this.kept) {
      if (this.chars <= this.maxChars) break;
      this.kept.delete(oldest);
      this.chars -= t.length;
    }
  }
}
