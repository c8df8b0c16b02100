import type pg from 'pg';
import type { EgressAuditRecords } from '../../model';
import { query } from './open';
import { toAttempt } from '../sqlite/egress';

/** The egress audit trail (see the SQLite twin): written as attempts happen, outside session commits. */
export function postgresEgressAudit(pool: pg.Pool): EgressAuditRecords {
  return {
    async recordEgress(a) {
      await query(
        pool,
        `INSERT INTO egress_attempts (at, run_id, lease_id, method, target, decision, reason, bytes_out, bytes_in, count, attempt_id, ended_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (attempt_id) DO UPDATE SET reason = EXCLUDED.reason, bytes_out = EXCLUDED.bytes_out, bytes_in = EXCLUDED.bytes_in, ended_at = EXCLUDED.ended_at
           WHERE EXCLUDED.ended_at IS NOT NULL`,
        [a.at, a.runId, a.leaseId, a.method, a.target, a.decision, a.reason, a.bytesOut, a.bytesIn, a.count, a.id ?? null, a.endedAt ?? null],
      );
    },
    async listEgress(filter = {}) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (filter.runId) (args.push(filter.runId), where.push(`run_id = $${args.length}`));
      if (filter.leaseId) (args.push(filter.leaseId), where.push(`lease_id = $${args.length}`));
      const sql = `SELECT * FROM egress_attempts ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY at, ord`;
      return (await query(pool, sql, args)).map(toAttempt);
    },
  };
}
