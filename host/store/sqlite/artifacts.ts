import type Database from 'better-sqlite3';
import type { Store, StoredArtifact } from '../store';
import type { Row } from './rows';

export const toArtifact = (r: Row): StoredArtifact => ({
  id: r.id as string,
  sessionId: r.session_id as string,
  runId: r.run_id as string,
  taskId: (r.task_id as string | null) ?? null,
  stepIndex: r.step_index as number,
  generation: r.generation as number,
  step: r.step as string,
  path: r.path as string,
  sizeBytes: r.size_bytes as number,
  sha256: r.sha256 as string,
  snapshotId: (r.snapshot_id as string | null) ?? null,
  commitSeq: r.commit_seq as number,
  createdAt: r.created_at as number,
  ...(r.mode === null || r.mode === undefined ? {} : { mode: Number(r.mode) }),
});

/** Artifact records are written by commits; this is their read. */
export function sqliteArtifacts(db: Database.Database): Pick<Store, 'listArtifacts'> {
  const byRun = db.prepare('SELECT * FROM artifacts WHERE run_id = ? ORDER BY step_index, generation, path');
  return {
    async listArtifacts(runId) {
      return (byRun.all(runId) as Row[]).map(toArtifact);
    },
  };
}
