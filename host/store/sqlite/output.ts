import type Database from 'better-sqlite3';
import { outputTails, type OutputChannel, type OutputChunk, type OutputRecords } from '../output';
import type { Row } from './rows';

/**
 * Schema 23: `run_output`. SQLite has one writer at a time, so the rowid assigned by an insert is
 * the order in which chunks become visible: a reader following `seq` never skips one.
 */
export const OUTPUT_SQL_SQLITE = `
  CREATE TABLE run_output (
    seq INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    source TEXT NOT NULL,
    label TEXT NOT NULL,
    attempt TEXT NOT NULL,
    n INTEGER NOT NULL,
    channel TEXT NOT NULL,
    at INTEGER NOT NULL,
    text TEXT NOT NULL,
    cut_bytes INTEGER NOT NULL,
    UNIQUE (attempt, n)
  ) STRICT;
  CREATE INDEX run_output_by_run ON run_output(run_id, seq);
`;

export const toOutputChunk = (r: Row): OutputChunk => ({
  seq: Number(r.seq),
  runId: r.run_id as string,
  source: r.source as string,
  label: r.label as string,
  attempt: r.attempt as string,
  n: Number(r.n),
  channel: r.channel as OutputChannel,
  at: Number(r.at),
  text: r.text as string,
  cutBytes: Number(r.cut_bytes),
});

export function sqliteOutput(db: Database.Database): OutputRecords {
  const insert = db.prepare('INSERT INTO run_output (run_id, source, label, attempt, n, channel, at, text, cut_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (attempt, n) DO NOTHING');
  const append = db.transaction((chunks: Parameters<OutputRecords['appendOutput']>[0]) => {
    for (const c of chunks) insert.run(c.runId, c.source, c.label, c.attempt, c.n, c.channel, c.at, c.text, c.cutBytes);
  });
  const all = db.prepare('SELECT * FROM run_output WHERE seq > ? ORDER BY seq LIMIT ?');
  const byRun = db.prepare('SELECT * FROM run_output WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?');
  const last = db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM run_output');
  // The attempts of a run read only the columns before `text`: a long chunk's overflow pages stay unread.
  const attemptsOfRun = db.prepare('SELECT attempt, MIN(seq) AS first FROM run_output WHERE run_id = ? GROUP BY attempt ORDER BY first');
  // By the (attempt, n) key: an attempt's newest chunks without touching its older ones.
  const firstOf = db.prepare('SELECT * FROM run_output WHERE attempt = ? ORDER BY n LIMIT 1');
  const newestOf = db.prepare('SELECT * FROM run_output WHERE attempt = ? AND n < ? ORDER BY n DESC LIMIT ?');
  return {
    async appendOutput(chunks) {
      if (chunks.length) append(chunks);
    },
    async listOutput(filter) {
      const limit = Math.floor(filter.limit ?? 1_000_000);
      const rows = filter.runId ? byRun.all(filter.runId, filter.afterSeq ?? 0, limit) : all.all(filter.afterSeq ?? 0, limit);
      return (rows as Row[]).map(toOutputChunk);
    },
    async listOutputTails(runId, chars) {
      const attempts = (attemptsOfRun.all(runId) as Array<{ attempt: string }>).map((r) => r.attempt);
      return outputTails(attempts, {
        first: async (attempt) => ((r) => (r ? toOutputChunk(r) : undefined))(firstOf.get(attempt) as Row | undefined),
        newest: async (attempt, beforeN, limit) => (newestOf.all(attempt, beforeN, limit) as Row[]).map(toOutputChunk),
      }, chars);
    },
    async lastOutputSeq() {
      return (last.get() as { seq: number }).seq;
    },
  };
}
