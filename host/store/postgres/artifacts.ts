import type pg from 'pg';
import type { NewArtifact } from '../commit-input';
import type { Store } from '../store';
import { toArtifact } from '../sqlite/artifacts';
import { query, type Queryable } from './open';

/** The insert a commit runs for each artifact record, inside its transaction. */
export async function insertArtifact(db: Queryable, a: NewArtifact, sessionId: string, commitSeq: number, at: number): Promise<void> {
  await query(
    db,
    `INSERT INTO artifacts (id, session_id, run_id, task_id, step_index, generation, step, path, size_bytes, sha256, snapshot_id, commit_seq, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [a.id, sessionId, a.runId, a.taskId, a.stepIndex, a.generation, a.step, a.path, a.sizeBytes, a.sha256, a.snapshotId, commitSeq, at],
  );
}

/** Artifact records are written by commits; this is their read (see the SQLite twin). */
export function postgresArtifacts(pool: pg.Pool): Pick<Store, 'listArtifacts'> {
  return {
    async listArtifacts(runId) {
      return (await query(pool, 'SELECT * FROM artifacts WHERE run_id = $1 ORDER BY step_index, generation, path', [runId])).map(toArtifact);
    },
  };
}
