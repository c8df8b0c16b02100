import type pg from 'pg';
import { byDecisionOrder, toDecision } from '../sqlite/acceptance';
import type { AcceptanceReads } from '../read-ports';
import { postgresImportedReads } from './imported';
import { query } from './open';

/** Reads of acceptance decisions, oldest first (see the SQLite twin). */
export function postgresAcceptanceReads(pool: pg.Pool): AcceptanceReads {
  const imported = postgresImportedReads(pool);
  return {
    async listAcceptance(filter) {
      const rows = filter.runId
        ? await query(pool, 'SELECT * FROM acceptance_decisions WHERE run_id = $1 ORDER BY at, commit_seq, id', [filter.runId])
        : await query(pool, 'SELECT * FROM acceptance_decisions ORDER BY at, commit_seq, id');
      const theirs = await imported.acceptance(filter);
      return (theirs.length === 0 ? rows : [...rows, ...theirs].sort(byDecisionOrder)).map(toDecision);
    },
    async findAcceptance(requestId) {
      const [r] = await query(pool, 'SELECT * FROM acceptance_decisions WHERE request_id = $1', [requestId]);
      return r ? toDecision(r) : undefined;
    },
  };
}
