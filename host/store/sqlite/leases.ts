import type Database from 'better-sqlite3';
import type { LeaseRecord, LeaseRecords, SweepRecord } from '../../model';
import { deferredSync } from './deferred-sync';
import type { Row } from './rows';
import { preparedFor } from './statement-cache';

/** A lease row as both stores hold it. */
export const toLease = (r: Row): LeaseRecord => ({
  id: r.id as string,
  sessionId: r.session_id as string,
  hostId: r.host_id as string,
  containerId: r.container_id as string,
  imageDigest: r.image_digest as string,
  envFingerprint: r.env_fingerprint as string,
  createdAt: r.created_at as number,
  expiresAt: r.expires_at as number,
  releasedAt: (r.released_at as number | null) ?? null,
  runId: (r.run_id as string | null) ?? null,
  epoch: r.epoch === null || r.epoch === undefined ? null : Number(r.epoch),
});

/** The SQLite side of the sandbox adapter's {@link LeaseRecords} port. */
export function sqliteLeaseRecords(db: Database.Database): LeaseRecords {
  const insert = db.prepare(
    `INSERT INTO leases (id, session_id, host_id, container_id, image_digest, env_fingerprint, created_at, expires_at, released_at, run_id, epoch)
     VALUES (@id, @sessionId, @hostId, @containerId, @imageDigest, @envFingerprint, @createdAt, @expiresAt, @releasedAt, @runId, @epoch)`,
  );
  // Only an unreleased intent (no container yet) takes a container id, and only once.
  const setContainer = db.prepare("UPDATE leases SET container_id = ? WHERE id = ? AND container_id = '' AND released_at IS NULL");
  const adopt = db.prepare('UPDATE leases SET epoch = ? WHERE id = ? AND released_at IS NULL AND (epoch IS NULL OR epoch < ?)');
  const heartbeat = db.prepare('UPDATE leases SET expires_at = ? WHERE id = ? AND released_at IS NULL');
  const release = db.prepare('UPDATE leases SET released_at = ? WHERE id = ? AND released_at IS NULL');
  const get = db.prepare('SELECT * FROM leases WHERE id = ?');
  const identity = db.prepare('SELECT id FROM store_identity LIMIT 1');
  const later = deferredSync(db);
  const sweep = db.prepare('INSERT INTO sweeps (container_id, lease_id, host_id, reason, at) VALUES (?, ?, ?, ?, ?)');
  return {
    async storeId() {
      return (identity.get() as { id: string }).id;
    },
    async insertLease(record, opts) {
      const row = { ...record, runId: record.runId ?? null, epoch: record.epoch ?? null };
      if (opts?.sync === 'with-next-commit') later(() => insert.run(row));
      else insert.run(row);
    },
    async adoptLease(id, epoch) {
      return adopt.run(epoch, id, epoch).changes === 1;
    },
    async setLeaseContainer(id, containerId) {
      return setContainer.run(containerId, id).changes === 1;
    },
    async heartbeatLease(id, expiresAt) {
      return heartbeat.run(expiresAt, id).changes === 1;
    },
    async releaseLease(id, at) {
      release.run(at, id);
    },
    async getLease(id) {
      const row = get.get(id) as Row | undefined;
      return row ? toLease(row) : undefined;
    },
    async listLeases(filter = {}) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (filter.hostId) (where.push('host_id = ?'), args.push(filter.hostId));
      if (filter.sessionId) (where.push('session_id = ?'), args.push(filter.sessionId));
      if (filter.runId) (where.push('run_id = ?'), args.push(filter.runId));
      if (filter.unreleased) where.push('released_at IS NULL');
      if (filter.activeAt !== undefined) (where.push('released_at IS NULL AND expires_at > ?'), args.push(filter.activeAt));
      const sql = `SELECT * FROM leases ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id`;
      return (preparedFor(db, sql).all(...args) as Row[]).map(toLease);
    },
    async recordSweep(r: SweepRecord) {
      sweep.run(r.containerId, r.leaseId, r.hostId, r.reason, r.at);
    },
    async listSweeps(filter = {}) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (filter.hostId) where.push('host_id = ?'), args.push(filter.hostId);
      if (filter.leaseId) where.push('lease_id = ?'), args.push(filter.leaseId);
      const rows = preparedFor(db, `SELECT * FROM sweeps ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY rowid`).all(...args) as Row[];
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
