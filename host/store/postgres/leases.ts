import type pg from 'pg';
import type { LeaseRecords, SweepRecord } from '../../model';
import { query } from './open';
import { toLease } from '../sqlite/leases';

/** The PostgreSQL side of the sandbox adapter's {@link LeaseRecords} port (see the SQLite twin). */
export function postgresLeaseRecords(pool: pg.Pool): LeaseRecords {
  return {
    async storeId() {
      return (await query<{ id: string }>(pool, 'SELECT id FROM store_identity LIMIT 1'))[0]!.id;
    },
    async insertLease(r) {
      await query(
        pool,
        `INSERT INTO leases (id, session_id, host_id, container_id, image_digest, env_fingerprint, created_at, expires_at, released_at, run_id, epoch)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [r.id, r.sessionId, r.hostId, r.containerId, r.imageDigest, r.envFingerprint, r.createdAt, r.expiresAt, r.releasedAt, r.runId ?? null, r.epoch ?? null],
      );
    },
    async adoptLease(id, epoch) {
      return (await query(pool, 'UPDATE leases SET epoch = $1 WHERE id = $2 AND released_at IS NULL AND (epoch IS NULL OR epoch < $1) RETURNING id', [epoch, id])).length === 1;
    },
    async setLeaseContainer(id, containerId) {
      // Only an unreleased intent (no container yet) takes a container id, and only once.
      const rows = await query(pool, "UPDATE leases SET container_id = $1 WHERE id = $2 AND container_id = '' AND released_at IS NULL RETURNING id", [containerId, id]);
      return rows.length === 1;
    },
    async heartbeatLease(id, expiresAt) {
      return (await query(pool, 'UPDATE leases SET expires_at = $1 WHERE id = $2 AND released_at IS NULL RETURNING id', [expiresAt, id])).length === 1;
    },
    async releaseLease(id, at) {
      await query(pool, 'UPDATE leases SET released_at = $1 WHERE id = $2 AND released_at IS NULL', [at, id]);
    },
    async getLease(id) {
      const [row] = await query(pool, 'SELECT * FROM leases WHERE id = $1', [id]);
      return row ? toLease(row) : undefined;
    },
    async listLeases(filter = {}) {
      const where: string[] = [];
      const args: unknown[] = [];
      const arg = (v: unknown) => (args.push(v), `$${args.length}`);
      if (filter.hostId) where.push(`host_id = ${arg(filter.hostId)}`);
      if (filter.sessionId) where.push(`session_id = ${arg(filter.sessionId)}`);
      if (filter.runId) where.push(`run_id = ${arg(filter.runId)}`);
      if (filter.unreleased) where.push('released_at IS NULL');
      if (filter.activeAt !== undefined) where.push(`released_at IS NULL AND expires_at > ${arg(filter.activeAt)}`);
      const sql = `SELECT * FROM leases ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id`;
      return (await query(pool, sql, args)).map(toLease);
    },
    async recordSweep(r: SweepRecord) {
      await query(pool, 'INSERT INTO sweeps (container_id, lease_id, host_id, reason, at) VALUES ($1, $2, $3, $4, $5)', [r.containerId, r.leaseId, r.hostId, r.reason, r.at]);
    },
    async listSweeps(filter = {}) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (filter.hostId) args.push(filter.hostId), where.push(`host_id = $${args.length}`);
      if (filter.leaseId) args.push(filter.leaseId), where.push(`lease_id = $${args.length}`);
      const rows = await query(pool, `SELECT * FROM sweeps ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ord`, args);
      return rows.map((r) => ({
        containerId: r.container_id as string,
        leaseId: (r.lease_id as string | null) ?? null,
        hostId: r.host_id as string,
        reason: r.reason as SweepRecord['reason'],
        at: r.at as number,
      }));
    },
  };
}
