import type Database from 'better-sqlite3';
import type { EgressAttempt, EgressAuditRecords } from '../../model';
import type { Row } from './rows';
import { preparedFor } from './statement-cache';

/** An egress attempt row as both stores hold it. */
export const toAttempt = (r: Row): EgressAttempt => ({
  at: r.at as number,
  runId: (r.run_id as string | null) ?? null,
  leaseId: (r.lease_id as string | null) ?? null,
  method: r.method as string,
  target: r.target as string,
  decision: r.decision as 'allow' | 'deny',
  reason: r.reason as string,
  bytesOut: r.bytes_out as number,
  bytesIn: r.bytes_in as number,
  count: r.count as number,
  id: (r.attempt_id as string | null | undefined) ?? null,
  endedAt: (r.ended_at as number | null | undefined) ?? null,
});

/** The egress audit trail: written as attempts happen, outside session commits (it is an observation, not run state). */
export function sqliteEgressAudit(db: Database.Database): EgressAuditRecords {
  const insert = db.prepare(
    `INSERT INTO egress_attempts (at, run_id, lease_id, method, target, decision, reason, bytes_out, bytes_in, count, attempt_id, ended_at)
     VALUES (@at, @runId, @leaseId, @method, @target, @decision, @reason, @bytesOut, @bytesIn, @count, @id, @endedAt)
     ON CONFLICT (attempt_id) DO UPDATE SET reason = excluded.reason, bytes_out = excluded.bytes_out, bytes_in = excluded.bytes_in, ended_at = excluded.ended_at
       WHERE excluded.ended_at IS NOT NULL`,
  );
  return {
    // An allowed request's start and end are one row (its id): the end completes it, and a start
    // that lands after its own end (two writes in flight) changes nothing.
    async recordEgress(a) {
      insert.run({ ...a, id: a.id ?? null, endedAt: a.endedAt ?? null });
    },
    async listEgress(filter = {}) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (filter.runId) (where.push('run_id = ?'), args.push(filter.runId));
      if (filter.leaseId) (where.push('lease_id = ?'), args.push(filter.leaseId));
      const sql = `SELECT * FROM egress_attempts ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY at, rowid`;
      return (preparedFor(db, sql).all(...args) as Row[]).map(toAttempt);
    },
  };
}
