import type Database from 'better-sqlite3';
import type { AcceptanceReads } from '../read-ports';
import type { AcceptanceDecision } from '../../model';
import { sqliteImportedReads } from './imported';
import { storedRow } from '../stored-json';
import type { Row } from './rows';

/** The order decisions are listed in: at, commit_seq, id (as the SQL says). */
export function byDecisionOrder(x: Row, y: Row): number {
  const [a, b] = [x, y].map((r) => [r.at as number, r.commit_seq as number, r.id as string] as const) as [readonly [number, number, string], readonly [number, number, string]];
  return a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
}

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
