import type Database from 'better-sqlite3';
import type { Run } from '../../model';
import { toRun, type Row } from './rows';

// Portable SQL only (the PostgreSQL twin is the same statement with `$1`).

/** The runs forked from a run, found by the parent the submit recorded (`runs.forked_from_run_id`, indexed). */
export interface ForkReads {
  /**
   * The runs forked directly from `runId` (plan forks, and the first run of each session forked
   * from it), in creation order as `listRuns` orders them; imported forks included.
   */
  listForks(runId: string): Promise<Run[]>;
}

export function sqliteForkReads(db: Database.Database): ForkReads {
  const byParent = db.prepare('SELECT * FROM runs WHERE forked_from_run_id = ? ORDER BY created_at, id');
  return {
    async listForks(runId) {
      return (byParent.all(runId) as Row[]).map(toRun);
    },
  };
}
