import type pg from 'pg';
import type { Store } from '../store';
import { toArtifact } from '../sqlite/artifacts';
import { query } from './open';

/** Artifact records are written by commits; this is their read (see the SQLite twin). */
export function postgresArtifacts(pool: pg.Pool): Pick<Store, 'listArtifacts'> {
  return {
    async listArtifacts(runId) {
      return (await query(pool, 'SELECT * FROM artifacts WHERE run_id = $1 ORDER BY step_index, generation, path', [runId])).map(toArtifact);
    },
  };
}
