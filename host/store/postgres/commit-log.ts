import type pg from 'pg';
import type { CommitLogRecords } from '../commit-log';
import { toLogged } from '../sqlite/commit-log';
import { query } from './open';
import { toEntry } from './rows';

/**
 * Reads of the store-wide commit order (see the SQLite twin). The numbers are assigned by each
 * commit's last statement under the `commit_log_counter` row lock (migration 12), so they become
 * visible in order: a reader that saw seq N never later sees a new seq below N.
 */
export function postgresCommitLog(pool: pg.Pool): CommitLogRecords {
  const base = 'SELECT l.seq, l.session_id, l.session_seq, c.at, c.label, c.actor FROM commit_log l JOIN commits c ON c.session_id = l.session_id AND c.seq = l.session_seq';
  return {
    async listCommitLog(filter = {}) {
      const limit = Math.floor(filter.limit ?? 1_000_000);
      const rows = filter.sessionId
        ? await query(pool, `${base} WHERE l.seq > $1 AND l.session_id = $2 ORDER BY l.seq LIMIT $3`, [filter.afterSeq ?? 0, filter.sessionId, limit])
        : await query(pool, `${base} WHERE l.seq > $1 ORDER BY l.seq LIMIT $2`, [filter.afterSeq ?? 0, limit]);
      return rows.map(toLogged);
    },
    async lastCommitLogSeq() {
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
  };
}
