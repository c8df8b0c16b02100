import type Database from 'better-sqlite3';
import { z } from 'zod';
import { decodeShaped } from '../stored-json';
import type { Clock } from '../../support/clock';
import { sessionScope, type ClaimResult, type SessionOwner, type WorkerHost, type WorkerReport } from '../ownership';

export { sessionScope } from '../ownership';

/**
 * The database clock: the time every lease_until is written and compared with. On SQLite (one
 * machine) it is the store's clock; a networked store uses the server's now(), so hosts with
 * skewed clocks still agree on when a lease ran out.
 */
export type DbClock = () => number;

export type OwnerRow = { scope: string; epoch: number; holder: string; pid: number | null; at: number; heartbeat_at: number | null; stopped_at: number | null; lease_until: number | null };
export type HostRow = { id: string; host_id: string; pid: number | null; tags: string; concurrency: number; started_at: number; heartbeat_at: number; stopped_at: number | null; report_json: string | null; drain_requested_at: number | null };

export const toOwner = (r: OwnerRow): SessionOwner => ({
  sessionId: r.scope.slice('session:'.length),
  epoch: r.epoch,
  holder: r.holder,
  pid: r.pid,
  takenAt: r.at,
  heartbeatAt: r.heartbeat_at ?? r.at,
  leaseUntil: r.lease_until ?? 0,
  stoppedAt: r.stopped_at,
});

const Tags = z.array(z.string());
const Report = z.object({ slotsInUse: z.number(), left: z.array(z.object({ sessionId: z.string(), runId: z.string().nullable(), why: z.string() })) });
export const HOST_COLUMNS = 'id, host_id, pid, tags, concurrency, started_at, heartbeat_at, stopped_at, report_json, drain_requested_at';

export const toHost = (r: HostRow): WorkerHost => ({
  id: r.id,
  hostId: r.host_id,
  pid: r.pid,
  tags: decodeShaped(r.tags, Tags, { table: 'hosts', rowId: r.id, field: 'tags' }),
  concurrency: r.concurrency,
  startedAt: r.started_at,
  heartbeatAt: r.heartbeat_at,
  stoppedAt: r.stopped_at,
  report: r.report_json === null ? null : decodeShaped(r.report_json, Report, { table: 'hosts', rowId: r.id, field: 'report_json' }),
  drainRequestedAt: r.drain_requested_at,
});

/**
 * Per-session ownership (one owner per run; an agent session's runs share one): claim, renew and
 * release, all compare-and-set on the epoch, in portable SQL. A claim bumps the epoch, so every
 * commit the previous owner still tries is refused by commit()'s fence check in its own transaction.
 */
/**
 * How the ownership writes (claim, renew, release, a worker's heartbeat and stop) reach the file:
 * `db` is the connection they run on, `write` runs one of them there and answers once it is
 * durable. The store passes its commit connection and the shared flush (sqlite-store.ts): on the
 * main connection each was a write flushed on its own, inside the call, holding the file's write
 * lock through the fsync (~2 ms) and sleeping in SQLite's busy handler while another worker held
 * it, the whole process frozen meanwhile.
 */
export interface OwnershipWrites {
  db: Database.Database;
  write<T>(apply: () => T): Promise<T>;
}

export function sqliteOwnership(db: Database.Database, clock: Clock, writes: OwnershipWrites = { db, write: async (apply) => apply() }) {
  const now: DbClock = () => clock.now();
  const w = writes.db;
  const cols = 'scope, epoch, holder, pid, at, heartbeat_at, stopped_at, lease_until';
  const get = db.prepare(`SELECT ${cols} FROM fencing WHERE scope = ?`);
  // The claim reads the row it replaces inside its own write transaction, on the writing connection.
  const getW = w.prepare(`SELECT ${cols} FROM fencing WHERE scope = ?`);
  const changes = db.prepare("SELECT COALESCE(SUM(MAX(epoch - 1, 0)), 0) AS n FROM fencing WHERE scope LIKE 'session:%'");
  const all = db.prepare(`SELECT ${cols} FROM fencing WHERE scope LIKE 'session:%' ORDER BY scope`);
  const liveOf = db.prepare(`SELECT ${cols} FROM fencing WHERE scope LIKE 'session:%' AND holder = ? AND epoch > 0 AND stopped_at IS NULL AND lease_until >= ? ORDER BY scope`);
  const take = w.prepare(
    `INSERT INTO fencing (scope, epoch, holder, pid, at, heartbeat_at, stopped_at, lease_until) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)
     ON CONFLICT (scope) DO UPDATE SET epoch = excluded.epoch, holder = excluded.holder, pid = excluded.pid, at = excluded.at,
       heartbeat_at = excluded.heartbeat_at, stopped_at = NULL, lease_until = excluded.lease_until`,
  );
  // A lapsed lease is never revived: its owner may already be judged dead, and its commits are refused (commit's fence).
  const renew = w.prepare('UPDATE fencing SET heartbeat_at = ?, lease_until = ? WHERE scope = ? AND epoch = ? AND stopped_at IS NULL AND lease_until >= ?');
  const release = w.prepare('UPDATE fencing SET heartbeat_at = ?, stopped_at = ?, lease_until = ? WHERE scope = ? AND epoch = ?');
  // Sessions with unfinished tasks whose owner (if any) stopped or let its lease run out.
  const claimable = db.prepare(
    `SELECT t.session_id AS session_id, MIN(t.created_at) AS first FROM tasks t
       LEFT JOIN fencing f ON f.scope = 'session:' || t.session_id
      WHERE t.status <> 'terminal' AND (f.scope IS NULL OR f.stopped_at IS NOT NULL OR f.lease_until IS NULL OR f.lease_until < ?)
      GROUP BY t.session_id ORDER BY first LIMIT ?`,
  );
  // The same, only sessions an owner left without releasing them (its lease ran out).
  const orphaned = db.prepare(
    `SELECT t.session_id AS session_id, MIN(t.created_at) AS first FROM tasks t
       JOIN fencing f ON f.scope = 'session:' || t.session_id
      WHERE t.status <> 'terminal' AND f.epoch > 0 AND f.stopped_at IS NULL AND f.lease_until < ?
      GROUP BY t.session_id ORDER BY first LIMIT ?`,
  );
  const hostUpsert = w.prepare(
    `INSERT INTO hosts (id, host_id, pid, tags, concurrency, started_at, heartbeat_at, stopped_at, report_json) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?)
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, tags = excluded.tags, concurrency = excluded.concurrency, stopped_at = NULL, report_json = COALESCE(excluded.report_json, hosts.report_json)`,
  );
  const hostStop = w.prepare('UPDATE hosts SET stopped_at = ?, heartbeat_at = ? WHERE id = ?');
  const hostsAll = db.prepare(`SELECT ${HOST_COLUMNS} FROM hosts ORDER BY started_at`);
  const hostOne = db.prepare(`SELECT ${HOST_COLUMNS} FROM hosts WHERE id = ?`);
  const drainAsk = db.prepare('UPDATE hosts SET drain_requested_at = ? WHERE (id = ? OR host_id = ?) AND stopped_at IS NULL AND drain_requested_at IS NULL RETURNING id');
  return {
    async claimSession(sessionId: string, holder: { hostId: string; pid: number | null }, ttlMs: number, opts: { takeOver?: boolean } = {}): Promise<ClaimResult> {
      return writes.write(() =>
        w
          .transaction((): ClaimResult => {
            const row = getW.get(sessionScope(sessionId)) as OwnerRow | undefined;
            const t = now();
            const previous = row ? toOwner(row) : null;
            const live = previous !== null && previous.stoppedAt === null && previous.leaseUntil >= t;
            if (live && !opts.takeOver) return { ok: false, owner: previous, now: t };
            const epoch = (row?.epoch ?? 0) + 1;
            take.run(sessionScope(sessionId), epoch, holder.hostId, holder.pid, t, t, t + ttlMs);
            return { ok: true, epoch, previous, now: t };
          })
          .immediate(),
      );
    },
    async renewSession(sessionId: string, epoch: number, ttlMs: number): Promise<boolean> {
      return writes.write(() => {
        const t = now();
        return renew.run(t, t + ttlMs, sessionScope(sessionId), epoch, t).changes === 1;
      });
    },
    async releaseSession(sessionId: string, epoch: number): Promise<boolean> {
      return writes.write(() => {
        const t = now();
        return release.run(t, t, t, sessionScope(sessionId), epoch).changes === 1;
      });
    },
    async getSessionOwner(sessionId: string): Promise<SessionOwner | undefined> {
      const row = get.get(sessionScope(sessionId)) as OwnerRow | undefined;
      return row ? toOwner(row) : undefined;
    },
    async listSessionOwners(filter: { liveHeldBy?: string } = {}): Promise<SessionOwner[]> {
      const rows = filter.liveHeldBy === undefined ? all.all() : liveOf.all(filter.liveHeldBy, now());
      return (rows as OwnerRow[]).map(toOwner);
    },
    async ownershipChanges(): Promise<number> {
      return (changes.get() as { n: number }).n;
    },
    async claimableSessions(limit: number, opts: { orphaned?: boolean } = {}): Promise<string[]> {
      return ((opts.orphaned ? orphaned : claimable).all(now(), limit) as Array<{ session_id: string }>).map((r) => r.session_id);
    },
    async databaseNow(): Promise<number> {
      return now();
    },
    async heartbeatHost(h: { id: string; hostId: string; pid: number | null; tags: string[]; concurrency: number; report?: WorkerReport }): Promise<void> {
      await writes.write(() => {
        const t = now();
        hostUpsert.run(h.id, h.hostId, h.pid, JSON.stringify(h.tags), h.concurrency, t, t, h.report ? JSON.stringify(h.report) : null);
      });
    },
    async stopHost(id: string): Promise<void> {
      await writes.write(() => {
        const t = now();
        hostStop.run(t, t, id);
      });
    },
    async listHosts(): Promise<WorkerHost[]> {
      return (hostsAll.all() as HostRow[]).map(toHost);
    },
    async getHost(id: string): Promise<WorkerHost | undefined> {
      const row = hostOne.get(id) as HostRow | undefined;
      return row ? toHost(row) : undefined;
    },
    async requestDrain(id: string): Promise<string[]> {
      return (drainAsk.all(now(), id, id) as Array<{ id: string }>).map((r) => r.id);
    },
  };
}
