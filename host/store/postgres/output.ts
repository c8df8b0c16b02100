import type pg from 'pg';
import { outputTails, type OutputRecords } from '../output';
import { toOutputChunk } from '../sqlite/output';
import { numberByReaders } from './commit-log';
import { query } from './open';

/**
 * Schema 23 (see the SQLite twin). Writers insert unnumbered rows (`ord` is only the insert
 * order); readers number what has committed under one advisory lock before they read, as the
 * commit log does (commit-log.ts), so numbers become visible in increasing order and a reader
 * following `seq` never skips a chunk a slower transaction committed later.
 */
export const OUTPUT_SQL_POSTGRES = `
  CREATE TABLE run_output (
    ord BIGSERIAL PRIMARY KEY,
    seq BIGINT UNIQUE,
    run_id TEXT NOT NULL,
    source TEXT NOT NULL,
    label TEXT NOT NULL,
    attempt TEXT NOT NULL,
    n INTEGER NOT NULL,
    channel TEXT NOT NULL,
    at BIGINT NOT NULL,
    text TEXT NOT NULL,
    cut_bytes BIGINT NOT NULL,
    UNIQUE (attempt, n)
  );
  CREATE INDEX run_output_by_run ON run_output(run_id, seq);
  CREATE INDEX run_output_unnumbered ON run_output(ord) WHERE seq IS NULL;
`;

const NUMBERING_LOCK = 4_711_023;

/** Numbered by readers under the output's own lock, as the commit log is (see numberByReaders). */
const numberOutput = (pool: pg.Pool) => numberByReaders(pool, 'run_output', NUMBERING_LOCK);

export function postgresOutput(pool: pg.Pool): OutputRecords {
  return {
    async appendOutput(chunks) {
      if (!chunks.length) return;
      const args: unknown[] = [];
      const rows = chunks.map((c) => {
        const base = args.length;
        args.push(c.runId, c.source, c.label, c.attempt, c.n, c.channel, c.at, c.text, c.cutBytes);
        return `(${Array.from({ length: 9 }, (_, i) => `$${base + i + 1}`).join(', ')})`;
      });
      // One statement per flush: the chunks of a flush land together. The text varies with the
      // row count; flushes are a handful of sizes, so the named-statement cache stays small.
      await query(pool, `INSERT INTO run_output (run_id, source, label, attempt, n, channel, at, text, cut_bytes) VALUES ${rows.join(', ')} ON CONFLICT (attempt, n) DO NOTHING`, args);
    },
    async listOutput(filter) {
      await numberOutput(pool);
      const limit = Math.floor(filter.limit ?? 1_000_000);
      const rows = filter.runId
        ? await query(pool, 'SELECT * FROM run_output WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [filter.runId, filter.afterSeq ?? 0, limit])
        : await query(pool, 'SELECT * FROM run_output WHERE seq > $1 ORDER BY seq LIMIT $2', [filter.afterSeq ?? 0, limit]);
      return rows.map(toOutputChunk);
    },
    async listOutputTails(runId, chars) {
      await numberOutput(pool);
      // Numbered rows only, as listOutput reads: what a reader following `seq` has seen or will see next.
      const attempts = (await query<{ attempt: string }>(pool, 'SELECT attempt, MIN(seq) AS first FROM run_output WHERE run_id = $1 AND seq IS NOT NULL GROUP BY attempt ORDER BY first', [runId])).map((r) => r.attempt);
      return outputTails(attempts, {
        first: async (attempt) => (await query(pool, 'SELECT * FROM run_output WHERE attempt = $1 AND seq IS NOT NULL ORDER BY n LIMIT 1', [attempt])).map(toOutputChunk)[0],
        newest: async (attempt, beforeN, limit) => (await query(pool, 'SELECT * FROM run_output WHERE attempt = $1 AND n < $2 AND seq IS NOT NULL ORDER BY n DESC LIMIT $3', [attempt, beforeN, limit])).map(toOutputChunk),
      }, chars);
    },
    async lastOutputSeq() {
      await numberOutput(pool);
      const [r] = await query<{ seq: number }>(pool, 'SELECT COALESCE(MAX(seq), 0) AS seq FROM run_output');
      return r!.seq;
    },
  };
}
