import type pg from 'pg';
import type { NewAcceptance } from '../commit-input';
import { byDecisionOrder, toDecision, type AcceptanceReads } from '../sqlite/acceptance';
import { postgresImportedReads } from './imported';
import { json } from './rows';
import { query, type Queryable } from './open';

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

/**
 * Writes one acceptance decision inside a commit's transaction. A request id already recorded is
 * the same decision asked again: nothing is written and it is not a conflict (as in SQLite).
 */
export async function writeAcceptance(db: Queryable, a: NewAcceptance, seq: number, at: number): Promise<void> {
  await query(
    db,
    `INSERT INTO acceptance_decisions (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (request_id) DO NOTHING`,
    [a.id, a.runId, a.requestId, a.decision, a.actor, a.reason, json(a.evidence), at, seq],
  );
}
