import type pg from 'pg';
import type { ForkReads } from '../read-ports';
import { query } from './open';
import { toRun } from './rows';

/** The runs forked from a run, by the indexed parent column (see the SQLite twin). */
export function postgresForkReads(pool: pg.Pool): ForkReads {
  return {
    async listForks(runId) {
      return (await query(pool, 'SELECT * FROM runs WHERE forked_from_run_id = $1 ORDER BY created_at, id', [runId])).map(toRun);
    },
  };
}
