import type pg from 'pg';
import type { Clock } from '../../support/clock';
import type { ExecutionRight } from '../store';
import { query } from './open';
import { toRight, type FenceRow } from '../sqlite/fencing';

/** The execution right of a fencing scope (see the SQLite twin); taking it is one atomic upsert. */
export function postgresFencing(pool: pg.Pool, clock: Clock) {
  return {
    async acquireEpoch(scope: string, holder: string, pid?: number): Promise<number> {
      const now = clock.now();
      // The row lock this update takes waits for commits holding the old epoch (FOR SHARE in the
      // commit), so no commit checked against the old epoch lands after the new one is visible.
      const [row] = await query<{ epoch: number }>(
        pool,
        `INSERT INTO fencing (scope, epoch, holder, pid, at, heartbeat_at, stopped_at) VALUES ($1, 1, $2, $3, $4, $4, NULL)
         ON CONFLICT (scope) DO UPDATE SET epoch = fencing.epoch + 1, holder = excluded.holder, pid = excluded.pid,
           at = excluded.at, heartbeat_at = excluded.heartbeat_at, stopped_at = NULL
         RETURNING epoch`,
        [scope, holder, pid ?? null, now],
      );
      return row!.epoch;
    },
    async heartbeatEpoch(scope: string, epoch: number): Promise<boolean> {
      return (await query(pool, 'UPDATE fencing SET heartbeat_at = $1 WHERE scope = $2 AND epoch = $3 RETURNING scope', [clock.now(), scope, epoch])).length === 1;
    },
    async releaseEpoch(scope: string, epoch: number): Promise<boolean> {
      const now = clock.now();
      return (await query(pool, 'UPDATE fencing SET heartbeat_at = $1, stopped_at = $1 WHERE scope = $2 AND epoch = $3 RETURNING scope', [now, scope, epoch])).length === 1;
    },
    async getExecutionRight(scope: string): Promise<ExecutionRight | undefined> {
      const [row] = await query<FenceRow>(pool, 'SELECT scope, epoch, holder, pid, at, heartbeat_at, stopped_at FROM fencing WHERE scope = $1', [scope]);
      return row ? toRight(row) : undefined;
    },
  };
}
