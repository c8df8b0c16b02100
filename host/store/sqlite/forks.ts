import type Database from 'better-sqlite3';
import type { ForkReads } from '../read-ports';
import { toRun, type Row } from './rows';

// Portable SQL only (the PostgreSQL twin is the same statement with `$1`).


export function sqliteForkReads(db: Database.Database): ForkReads {
  const byParent = db.prepare('SELECT * FROM runs WHERE forked_from_run_id = ? ORDER BY created_at, id');
  return {
    async listForks(runId) {
      return (byParent.all(runId) as Row[]).map(toRun);
    },
  };
}
