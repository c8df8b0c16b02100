import type Database from 'better-sqlite3';
import type { Clock } from '../../support/clock';
import type { ExecutionRight } from '../store';

/** A fencing row (the execution right of a scope) as both stores hold it. */
export type FenceRow = { scope: string; epoch: number; holder: string; pid: number | null; at: number; heartbeat_at: number | null; stopped_at: number | null };
export const toRight = (r: FenceRow): ExecutionRight => ({
  scope: r.scope,
  epoch: r.epoch,
  holder: r.holder,
  pid: r.pid,
  takenAt: r.at,
  heartbeatAt: r.heartbeat_at ?? r.at,
  stoppedAt: r.stopped_at,
});

/**
 * The execution right of a fencing scope: taking it bumps the epoch (every commit fenced with an
 * older one is refused from then on); the holder heartbeats it, fenced by its epoch, so a host
 * learns it lost the right even when it has nothing to commit, and readers learn whether anyone
 * is driving the store.
 */
export function sqliteFencing(db: Database.Database, clock: Clock) {
  const get = db.prepare('SELECT scope, epoch, holder, pid, at, heartbeat_at, stopped_at FROM fencing WHERE scope = ?');
  const take = db.prepare(
    `INSERT INTO fencing (scope, epoch, holder, pid, at, heartbeat_at, stopped_at) VALUES (?, ?, ?, ?, ?, ?, NULL)
     ON CONFLICT(scope) DO UPDATE SET epoch = excluded.epoch, holder = excluded.holder, pid = excluded.pid, at = excluded.at, heartbeat_at = excluded.heartbeat_at, stopped_at = NULL`,
  );
  const beat = db.prepare('UPDATE fencing SET heartbeat_at = ? WHERE scope = ? AND epoch = ?');
  const stop = db.prepare('UPDATE fencing SET heartbeat_at = ?, stopped_at = ? WHERE scope = ? AND epoch = ?');

  return {
    async acquireEpoch(scope: string, holder: string, pid?: number): Promise<number> {
      return db
        .transaction(() => {
          const row = get.get(scope) as { epoch: number } | undefined;
          const epoch = (row?.epoch ?? 0) + 1;
          const now = clock.now();
          take.run(scope, epoch, holder, pid ?? null, now, now);
          return epoch;
        })
        .immediate();
    },
    async heartbeatEpoch(scope: string, epoch: number): Promise<boolean> {
      return beat.run(clock.now(), scope, epoch).changes === 1;
    },
    async releaseEpoch(scope: string, epoch: number): Promise<boolean> {
      const now = clock.now();
      return stop.run(now, now, scope, epoch).changes === 1;
    },
    async getExecutionRight(scope: string): Promise<ExecutionRight | undefined> {
      const row = get.get(scope) as Parameters<typeof toRight>[0] | undefined;
      return row ? toRight(row) : undefined;
    },
  };
}
