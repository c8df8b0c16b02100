import type Database from 'better-sqlite3';
import type { AcceptanceDecision } from '../../model';
import type { NewAcceptance } from '../commit-input';
import { json, parse, type Row } from './rows';

export const toDecision = (r: Row): AcceptanceDecision => ({
  id: r.id as string,
  runId: r.run_id as string,
  requestId: r.request_id as string,
  decision: r.decision as AcceptanceDecision['decision'],
  actor: r.actor as string,
  reason: (r.reason as string | null) ?? null,
  evidence: parse(r.evidence_json as string),
  at: r.at as number,
  commitSeq: r.commit_seq as number,
});

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

/**
 * Writes a commit's acceptance decisions inside its transaction. A request id already recorded
 * is the same decision asked again (a retried `berth accept`, a resumed acceptance command): it
 * writes nothing and is not a conflict.
 */
export function acceptanceWriter(db: Database.Database): (a: NewAcceptance, seq: number, at: number) => void {
  const insert = db.prepare(
    `INSERT INTO acceptance_decisions (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (request_id) DO NOTHING`,
  );
  return (a, seq, at) => {
    insert.run(a.id, a.runId, a.requestId, a.decision, a.actor, a.reason, json(a.evidence), at, seq);
  };
}
