import type pg from 'pg';
import { toDecision, type AcceptanceReads } from '../sqlite/acceptance';
import { query } from './open';

/** Reads of acceptance decisions, oldest first (see the SQLite twin). */
export function postgresAcceptanceReads(pool: pg.Pool): AcceptanceReads {
  return {
    async listAcceptance(filter) {
      const rows = filter.runId
        ? await query(pool, 'SELECT * FROM acceptance_decisions WHERE run_id = $1 ORDER BY at, commit_seq, id', [filter.runId])
        : await query(pool, 'SELECT * FROM acceptance_decisions ORDER BY at, commit_seq, id');
      return rows.map(toDecision);
    },
    async findAcceptance(requestId) {
      const [r] = await query(pool, 'SELECT * FROM acceptance_decisions WHERE request_id = $1', [requestId]);
      return r ? toDecision(r) : undefined;
    },
  };
}
