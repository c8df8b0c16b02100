import type pg from 'pg';
import type { ExecutionRight } from '../store';
import { query } from './open';
import { serverNowMs } from './server-clock';
import { toRight, type FenceRow } from '../sqlite/fencing';
import type { DbClock } from '../sqlite/ownership';

/**
 * The execution right of a fencing scope (see the SQLite twin); taking it is one atomic upsert.
 * Every time is the database clock (the server's, or `dbClock` in tests that step time), as for
 * session ownership: a heartbeat written with one host's clock and judged against the server's by
 * another would make a live holder look dead, or a dead one live.
 */
export function postgresFencing(pool: pg.Pool, dbClock?: DbClock) {
  const clockParam = () => (dbClock ? dbClock() : null);
  return {
    async acquireEpoch(scope: string, holder: string, pid?: number): Promise<number> {
      // The row lock this update takes waits for commits holding the old epoch (FOR SHARE in the
      // commit), so no commit checked against the old epoch lands after the new one is visible.
      const [row] = await query<{ epoch: number }>(
        pool,
        `INSERT INTO fencing (scope, epoch, holder, pid, at, heartbeat_at, stopped_at)
         SELECT $1::text, 1, $2::text, $3::bigint, c.t, c.t, NULL::bigint FROM (SELECT ${serverNowMs('$4')} AS t) c
         ON CONFLICT (scope) DO UPDATE SET epoch = fencing.epoch + 1, holder = excluded.holder, pid = excluded.pid,
           at = excluded.at, heartbeat_at = excluded.heartbeat_at, stopped_at = NULL
         RETURNING epoch`,
        [scope, holder, pid ?? null, clockParam()],
      );
      return row!.epoch;
    },
    async heartbeatEpoch(scope: string, epoch: number): Promise<boolean> {
      const sql = `UPDATE fencing SET heartbeat_at = ${serverNowMs('$3')} WHERE scope = $1 AND epoch = $2 RETURNING scope`;
      return (await query(pool, sql, [scope, epoch, clockParam()])).length === 1;
    },
    async releaseEpoch(scope: string, epoch: number): Promise<boolean> {
      const sql = `WITH c AS (SELECT ${serverNowMs('$3')} AS t) UPDATE fencing SET heartbeat_at = c.t, stopped_at = c.t FROM c WHERE scope = $1 AND epoch = $2 RETURNING scope`;
      return (await query(pool, sql, [scope, epoch, clockParam()])).length === 1;
    },
    async getExecutionRight(scope: string): Promise<ExecutionRight | undefined> {
      const [row] = await query<FenceRow>(pool, 'SELECT scope, epoch, holder, pid, at, heartbeat_at, stopped_at FROM fencing WHERE scope = $1', [scope]);
      return row ? toRight(row) : undefined;
    },
  };
}
