import type Database from 'better-sqlite3';
import type { AcceptanceDecision } from '../../model';
import type { NewAcceptance } from '../commit-input';
import { sqliteImportedReads } from './imported';
import { json, parse, type Row } from './rows';

/** The order decisions are listed in: at, commit_seq, id (as the SQL says). */
export function byDecisionOrder(x: Row, y: Row): number {
  const [a, b] = [x, y].map((r) => [r.at as number, r.commit_seq as number, r.id as string] as const) as [readonly [number, number, string], readonly [number, number, string]];
  return a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
}

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

/** Decisions by run include an imported run's (kept apart); by request id only live ones, as a request id is a live key. */
export function sqliteAcceptanceReads(db: Database.Database): AcceptanceReads {
  const imported = sqliteImportedReads(db);
  const byRun = db.prepare('SELECT * FROM acceptance_decisions WHERE run_id = ? ORDER BY at, commit_seq, id');
  const all = db.prepare('SELECT * FROM acceptance_decisions ORDER BY at, commit_seq, id');
  const byRequest = db.prepare('SELECT * FROM acceptance_decisions WHERE request_id = ?');
  return {
    async listAcceptance(filter) {
      const live = (filter.runId ? byRun.all(filter.runId) : all.all()) as Row[];
      const theirs = imported.acceptance(filter);
      return (theirs.length === 0 ? live : [...live, ...theirs].sort(byDecisionOrder)).map(toDecision);
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
