import type pg from 'pg';
import type { ClaimResult, OwnershipRecords, SessionOwner, WorkerHost } from '../ownership';
import { HOST_COLUMNS, sessionScope, toHost, toOwner, type DbClock, type HostRow, type OwnerRow } from '../sqlite/ownership';
import { query, transaction, type Queryable } from './open';
import { serverNowMs } from './server-clock';

const SERVER_NOW = `SELECT ${serverNowMs()} AS t`;
const COLS = 'scope, epoch, holder, pid, at, heartbeat_at, stopped_at, lease_until';

/**
 * Per-session ownership (see the SQLite twin), every time taken from the database clock: the
 * PostgreSQL server's, so hosts with skewed clocks agree on when a lease ran out. `dbClock`
 * replaces it (tests that step time).
 */
export function postgresOwnership(pool: pg.Pool, dbClock?: DbClock): OwnershipRecords {
  const now = async (db: Queryable): Promise<number> => (dbClock ? dbClock() : (await query<{ t: number }>(db, SERVER_NOW))[0]!.t);
  // For a statement that reads the clock itself ($n of serverNowMs): the test clock, or NULL for the server's.
  const clockParam = () => (dbClock ? dbClock() : null);
  const claim = async (db: pg.PoolClient, sessionId: string, holder: { hostId: string; pid: number | null }, ttlMs: number, takeOver: boolean): Promise<ClaimResult> => {
    const scope = sessionScope(sessionId);
    // The connection pipelines: the placeholder, the lock and the clock travel together (one round
    // trip) and run in order, so the clock is read after the lock was granted.
    const sent = <T extends Record<string, unknown>>(p: Promise<T[]>) => (p.catch(() => {}), p);
    // SQLite's BEGIN IMMEDIATE is the whole file; here the row lock is. A first claim has no row
    // to lock, so a stopped placeholder (epoch 0) is inserted first: of two first claimers the
    // second waits on the first's insert, then locks and reads the row the first committed.
    const placeholder = sent(
      query(
        db,
        `INSERT INTO fencing (${COLS}) SELECT $1, 0, $2, $3, c.t, c.t, c.t, 0 FROM (SELECT ${serverNowMs('$4')} AS t) c ON CONFLICT (scope) DO NOTHING`,
        [scope, holder.hostId, holder.pid, clockParam()],
      ),
    );
    // FOR UPDATE also waits for commits still holding the old epoch (they read it FOR SHARE).
    const locked = sent(query<OwnerRow>(db, `SELECT ${COLS} FROM fencing WHERE scope = $1 FOR UPDATE`, [scope]));
    const clock = sent(query<{ t: number }>(db, `SELECT ${serverNowMs('$1')} AS t`, [clockParam()]));
    await placeholder; // the first failure is the one reported
    const [row] = await locked;
    const t = (await clock)[0]!.t;
    const previous = row && row.epoch > 0 ? toOwner(row) : null;
    const live = previous !== null && previous.stoppedAt === null && previous.leaseUntil >= t;
    if (live && !takeOver) return { ok: false, owner: previous, now: t };
    const epoch = (row?.epoch ?? 0) + 1;
    await query(
      db,
      'UPDATE fencing SET epoch = $1, holder = $2, pid = $3, at = $4, heartbeat_at = $4, stopped_at = NULL, lease_until = $5 WHERE scope = $6',
      [epoch, holder.hostId, holder.pid, t, t + ttlMs, scope],
    );
    return { ok: true, epoch, previous, now: t };
  };
  return {
    async claimSession(sessionId, holder, ttlMs, opts = {}) {
      return transaction(pool, (client) => claim(client, sessionId, holder, ttlMs, opts.takeOver ?? false));
    },
    async renewSession(sessionId, epoch, ttlMs) {
      // One statement on the server's clock; a lapsed lease is never revived (see the SQLite twin).
      const rows = await query(
        pool,
        `WITH c AS (SELECT ${serverNowMs('$4')} AS t)
         UPDATE fencing SET heartbeat_at = c.t, lease_until = c.t + $3 FROM c
          WHERE scope = $1 AND epoch = $2 AND stopped_at IS NULL AND lease_until >= c.t RETURNING scope`,
        [sessionScope(sessionId), epoch, ttlMs, clockParam()],
      );
      return rows.length === 1;
    },
    async releaseSession(sessionId, epoch) {
      const rows = await query(
        pool,
        `WITH c AS (SELECT ${serverNowMs('$3')} AS t)
         UPDATE fencing SET heartbeat_at = c.t, stopped_at = c.t, lease_until = c.t FROM c WHERE scope = $1 AND epoch = $2 RETURNING scope`,
        [sessionScope(sessionId), epoch, clockParam()],
      );
      return rows.length === 1;
    },
    async getSessionOwner(sessionId): Promise<SessionOwner | undefined> {
      const [row] = await query<OwnerRow>(pool, `SELECT ${COLS} FROM fencing WHERE scope = $1 AND epoch > 0`, [sessionScope(sessionId)]);
      return row ? toOwner(row) : undefined;
    },
    async listSessionOwners(filter = {}) {
      if (filter.liveHeldBy !== undefined) {
        const live = `SELECT ${COLS} FROM fencing WHERE scope LIKE 'session:%' AND holder = $1 AND epoch > 0 AND stopped_at IS NULL AND lease_until >= ${serverNowMs('$2')} ORDER BY scope`;
        return (await query<OwnerRow>(pool, live, [filter.liveHeldBy, clockParam()])).map(toOwner);
      }
      return (await query<OwnerRow>(pool, `SELECT ${COLS} FROM fencing WHERE scope LIKE 'session:%' AND epoch > 0 ORDER BY scope`)).map(toOwner);
    },
    async ownershipChanges() {
      // SUM of a BIGINT is a NUMERIC, which pg hands over as a string.
      const [r] = await query<{ n: string }>(pool, "SELECT COALESCE(SUM(GREATEST(epoch - 1, 0)), 0) AS n FROM fencing WHERE scope LIKE 'session:%'");
      return Number(r!.n);
    },
    async claimableSessions(limit, opts = {}) {
      // Sessions with unfinished tasks whose owner (if any) stopped or let its lease run out
      // (`orphaned`: only the latter). Ties on the clock go to the session whose task was inserted
      // first (`ord`; SQLite's grouping gives that order by itself, PostgreSQL's hash aggregate does not).
      const owner = opts.orphaned
        ? `JOIN fencing f ON f.scope = 'session:' || t.session_id WHERE t.status <> 'terminal' AND f.epoch > 0 AND f.stopped_at IS NULL AND f.lease_until < ${serverNowMs('$1')}`
        : `LEFT JOIN fencing f ON f.scope = 'session:' || t.session_id WHERE t.status <> 'terminal' AND (f.scope IS NULL OR f.stopped_at IS NOT NULL OR f.lease_until IS NULL OR f.lease_until < ${serverNowMs('$1')})`;
      const rows = await query<{ session_id: string }>(
        pool,
        `SELECT t.session_id AS session_id, MIN(t.created_at) AS first FROM tasks t ${owner}
          GROUP BY t.session_id ORDER BY first, MIN(t.ord) LIMIT $2`,
        [clockParam(), Math.floor(limit)],
      );
      return rows.map((r) => r.session_id);
    },
    async databaseNow() {
      return now(pool);
    },
    async heartbeatHost(h) {
      await query(
        pool,
        `INSERT INTO hosts (id, host_id, pid, tags, concurrency, started_at, heartbeat_at, stopped_at, report_json)
         SELECT $1::text, $2::text, $3::bigint, $4::text, $5::bigint, c.t, c.t, NULL::bigint, $7::text FROM (SELECT ${serverNowMs('$6')} AS t) c
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, tags = excluded.tags, concurrency = excluded.concurrency, stopped_at = NULL, report_json = COALESCE(excluded.report_json, hosts.report_json)`,
        [h.id, h.hostId, h.pid, JSON.stringify(h.tags), h.concurrency, clockParam(), h.report ? JSON.stringify(h.report) : null],
      );
    },
    async stopHost(id) {
      await query(pool, `WITH c AS (SELECT ${serverNowMs('$2')} AS t) UPDATE hosts SET stopped_at = c.t, heartbeat_at = c.t FROM c WHERE id = $1`, [id, clockParam()]);
    },
    async listHosts(): Promise<WorkerHost[]> {
      return (await query<HostRow>(pool, `SELECT ${HOST_COLUMNS} FROM hosts ORDER BY started_at`)).map(toHost);
    },
    async getHost(id) {
      const [row] = await query<HostRow>(pool, `SELECT ${HOST_COLUMNS} FROM hosts WHERE id = $1`, [id]);
      return row ? toHost(row) : undefined;
    },
    async requestDrain(id) {
      const rows = await query<{ id: string }>(
        pool,
        `WITH c AS (SELECT ${serverNowMs('$2')} AS t) UPDATE hosts SET drain_requested_at = c.t FROM c WHERE (hosts.id = $1 OR hosts.host_id = $1) AND hosts.stopped_at IS NULL AND hosts.drain_requested_at IS NULL RETURNING hosts.id`,
        [id, clockParam()],
      );
      return rows.map((r) => r.id);
    },
  };
}
