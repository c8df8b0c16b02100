import type Database from 'better-sqlite3';
import type { CommitLogRecords, LoggedCommit } from '../commit-log';
import { toEntry, type Row } from './rows';

/**
 * Migration 9 (its own file so parallel branches merge cleanly; the lead renumbers): a store-wide
 * commit order. Commits are keyed per session (session_id, seq), which gives no order across
 * sessions; `commit_log.seq` does. SQLite has one writer at a time, so the rowid assigned inside
 * the commit's transaction is the commit order. Existing commits are numbered by time.
 * (PostgreSQL: an identity column needs the commit to take a lock first, or a later-assigned id
 * could become visible before an earlier one and a reader following `afterSeq` would skip it.)
 */
export const COMMIT_LOG_MIGRATION = {
  version: 12,
  name: 'store-wide commit order',
  sql: `
    CREATE TABLE commit_log (
      seq INTEGER PRIMARY KEY,
      session_id TEXT NOT NULL,
      session_seq INTEGER NOT NULL,
      UNIQUE (session_id, session_seq)
    ) STRICT;
    INSERT INTO commit_log (session_id, session_seq) SELECT session_id, seq FROM commits ORDER BY at, session_id, seq;
  `,
} as const;

export const toLogged = (r: Row): LoggedCommit => ({
  seq: r.seq as number,
  sessionId: r.session_id as string,
  sessionSeq: r.session_seq as number,
  at: r.at as number,
  label: r.label as string,
  actor: r.actor as string,
});

/** Reads of the store-wide commit order and newest-first entry pages. */
export function sqliteCommitLog(db: Database.Database): CommitLogRecords {
  const base = 'SELECT l.seq, l.session_id, l.session_seq, c.at, c.label, c.actor FROM commit_log l JOIN commits c ON c.session_id = l.session_id AND c.seq = l.session_seq';
  const all = db.prepare(`${base} WHERE l.seq > ? ORDER BY l.seq LIMIT ?`);
  const bySession = db.prepare(`${base} WHERE l.seq > ? AND l.session_id = ? ORDER BY l.seq LIMIT ?`);
  const last = db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM commit_log');
  // Summed in SQL from each body's `usage`: only three numbers cross into JavaScript, however long the run.
  const usage = db.prepare(
    "SELECT COALESCE(SUM(json_extract(body_json, '$.usage.promptTokens')), 0) AS prompt, COALESCE(SUM(json_extract(body_json, '$.usage.completionTokens')), 0) AS completion, COALESCE(SUM(json_extract(body_json, '$.usage.totalTokens')), 0) AS total FROM entries WHERE session_id = ? AND run_id = ? AND kind = ?",
  );
  return {
    async listCommitLog(filter = {}) {
      const limit = Math.floor(filter.limit ?? 1_000_000);
      const rows = filter.sessionId ? bySession.all(filter.afterSeq ?? 0, filter.sessionId, limit) : all.all(filter.afterSeq ?? 0, limit);
      return (rows as Row[]).map(toLogged);
    },
    async lastCommitLogSeq() {
      return (last.get() as { seq: number }).seq;
    },
    async listEntriesNewest(sessionId, filter) {
      const clauses = ['session_id = ?'];
      const args: unknown[] = [sessionId];
      if (filter.runId) (clauses.push('run_id = ?'), args.push(filter.runId));
      if (filter.beforeSeq !== undefined) (clauses.push('seq < ?'), args.push(filter.beforeSeq));
      args.push(Math.floor(filter.limit));
      return (db.prepare(`SELECT * FROM entries WHERE ${clauses.join(' AND ')} ORDER BY seq DESC LIMIT ?`).all(...args) as Row[]).map(toEntry);
    },
    async sumEntryUsage(sessionId, filter) {
      const r = usage.get(sessionId, filter.runId, filter.kind) as { prompt: number; completion: number; total: number };
      return { prompt: r.prompt, completion: r.completion, total: r.total };
    },
  };
}
