import type pg from 'pg';
import type { CommitLogRecords } from '../commit-log';
import { toLogged } from '../sqlite/commit-log';
import { query, transaction } from './open';
import { toEntry } from './rows';

/** The advisory lock key under which committed rows of the commit log are numbered (one numberer at a time). */
const NUMBERING_LOCK = 4_711_020;

/**
 * Numbers every committed, unnumbered row of the commit log (schema 20): after the one advisory
 * lock, so the previous numberer has committed and this statement's snapshot (READ COMMITTED: taken
 * after the lock) sees its numbers; MAX + row_number continues them without a gap. A commit still
 * in flight is invisible here and gets a higher number from a later numberer, so numbers become
 * visible in increasing order: a reader that saw N never later finds a new number at or below N.
 * Commits never wait for this (they only insert), so they can share the server's WAL flushes.
 */
export function numberCommitLog(pool: pg.Pool): Promise<void> {
  return numberByReaders(pool, 'commit_log', NUMBERING_LOCK);
}

/**
 * Numbers the committed, unnumbered rows (`seq IS NULL`, ordered by `ord`) of a table numbered by
 * its readers, as {@link numberCommitLog} explains; `lock` is the table's own advisory lock. The
 * table name is one of this store's own, never input.
 */
export async function numberByReaders(pool: pg.Pool, table: 'commit_log' | 'run_output', lock: number): Promise<void> {
  const [pending] = await query<{ any: boolean }>(pool, `SELECT EXISTS (SELECT 1 FROM ${table} WHERE seq IS NULL) AS any`);
  if (!pending?.any) return;
  await transaction(pool, async (client) => {
    await query(client, 'SELECT pg_advisory_xact_lock($1)', [lock]);
    await query(
      client,
      `WITH base AS (SELECT COALESCE(MAX(seq), 0) AS top FROM ${table}),
            todo AS (SELECT ord, row_number() OVER (ORDER BY ord) AS k FROM ${table} WHERE seq IS NULL)
       UPDATE ${table} t SET seq = base.top + todo.k FROM base, todo WHERE t.ord = todo.ord`,
    );
  });
}

/**
 * Reads of the store-wide commit order (see the SQLite twin). Commits insert their row unnumbered;
 * each read numbers what has committed since ({@link numberCommitLog}) before it reads, so the
 * numbers it returns are final and a reader following `afterSeq` misses nothing.
 */
export function postgresCommitLog(pool: pg.Pool): CommitLogRecords {
  const base = 'SELECT l.seq, l.session_id, l.session_seq, c.at, c.label, c.actor FROM commit_log l JOIN commits c ON c.session_id = l.session_id AND c.seq = l.session_seq';
  return {
    async listCommitLog(filter = {}) {
      await numberCommitLog(pool);
      const limit = Math.floor(filter.limit ?? 1_000_000);
      const rows = filter.sessionId
        ? await query(pool, `${base} WHERE l.seq > $1 AND l.session_id = $2 ORDER BY l.seq LIMIT $3`, [filter.afterSeq ?? 0, filter.sessionId, limit])
        : await query(pool, `${base} WHERE l.seq > $1 ORDER BY l.seq LIMIT $2`, [filter.afterSeq ?? 0, limit]);
      return rows.map(toLogged);
    },
    async lastCommitLogSeq() {
      await numberCommitLog(pool);
      const [r] = await query<{ seq: number }>(pool, 'SELECT COALESCE(MAX(seq), 0) AS seq FROM commit_log');
      return r!.seq;
    },
    async listEntriesNewest(sessionId, filter) {
      const clauses = ['session_id = $1'];
      const args: unknown[] = [sessionId];
      if (filter.runId) (args.push(filter.runId), clauses.push(`run_id = $${args.length}`));
      if (filter.beforeSeq !== undefined) (args.push(filter.beforeSeq), clauses.push(`seq < $${args.length}`));
      args.push(Math.floor(filter.limit));
      return (await query(pool, `SELECT * FROM entries WHERE ${clauses.join(' AND ')} ORDER BY seq DESC LIMIT $${args.length}`, args)).map(toEntry);
    },
    async sumEntryUsage(sessionId, filter) {
      // Summed by the server from each body's `usage`: three numbers come back, however long the run.
      const [r] = await query(
        pool,
        "SELECT COALESCE(SUM((body_json::jsonb -> 'usage' ->> 'promptTokens')::bigint), 0) AS prompt, COALESCE(SUM((body_json::jsonb -> 'usage' ->> 'completionTokens')::bigint), 0) AS completion, COALESCE(SUM((body_json::jsonb -> 'usage' ->> 'totalTokens')::bigint), 0) AS total FROM entries WHERE session_id = $1 AND run_id = $2 AND kind = $3",
        [sessionId, filter.runId, filter.kind],
      );
      return { prompt: Number(r?.prompt ?? 0), completion: Number(r?.completion ?? 0), total: Number(r?.total ?? 0) };
    },
  };
}
