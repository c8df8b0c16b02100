import type Database from 'better-sqlite3';
import type { AcceptanceDecision } from '../../model';
import { storedRow } from '../stored-json';
import type { Row } from './rows';

const DECISIONS = ['accepted', 'rejected'] as const;

export const toDecision = (r: Row): AcceptanceDecision => {
  const d = storedRow('acceptance_decisions', r, String(r.id));
  return {
    id: r.id as string,
    runId: r.run_id as string,
    requestId: r.request_id as string,
    decision: d.oneOf('decision', DECISIONS),
    actor: r.actor as string,
    reason: (r.reason as string | null) ?? null,
    // Command evidence is parsed by host/acceptance where it is read for its fields.
    evidence: d.json('evidence_json'),
    at: r.at as number,
    commitSeq: r.commit_seq as number,
  };
};

/** Reads of acceptance decisions, oldest first (the newest is the run's current acceptance). */
export interface AcceptanceReads {
  listAcceptance(filter: { runId?: string }): Promise<AcceptanceDecision[]>;
  findAcceptance(requestId: string): Promise<AcceptanceDecision | undefined>;
}

export function sqliteAcceptanceReads(db: Database.Database): AcceptanceReads {
  const byRun = db.prepare('SELECT * FROM acceptance_decisions WHERE run_id = ? ORDER BY at, commit_seq, id');
  const all = db.prepare('SELECT * FROM acceptance_decisions ORDER BY at, commit_seq, id');
  const byRequest = db.prepare('SELECT * FROM acceptance_decisions WHERE request_id = ?');
  return {
    async listAcceptance(filter) {
      return ((filter.runId ? byRun.all(filter.runId) : all.all()) as Row[]).map(toDecision);
    },
    async findAcceptance(requestId) {
      const r = byRequest.get(requestId) as Row | undefined;
      return r ? toDecision(r) : undefined;
    },
  };
}
