import type pg from 'pg';
import type { Store } from '../store';
import { decodeJson } from '../stored-json';
import { json, toSnapshot } from './rows';
import { query } from './open';

type SnapshotMethods = Pick<Store, 'getSnapshot' | 'listSnapshots' | 'markSnapshotPruned' | 'putWorkspaceManifest' | 'getWorkspaceManifest'>;

/** Snapshot reads and the non-session bookkeeping beside them (see the SQLite twin). */
export function postgresSnapshots(pool: pg.Pool): SnapshotMethods {
  return {
    async getSnapshot(id) {
      const [r] = await query(pool, 'SELECT * FROM snapshots WHERE id = $1', [id]);
      return r ? toSnapshot(r) : undefined;
    },
    async listSnapshots(filter) {
      if (filter.page && filter.newest === undefined && (filter.runId || filter.sessionId)) {
        const [col, id] = filter.runId ? ['run_id', filter.runId] : ['session_id', filter.sessionId!];
        const args = [id, Math.max(0, Math.floor(filter.page.limit)), Math.max(0, Math.floor(filter.page.offset))];
        return (await query(pool, `SELECT * FROM snapshots WHERE ${col} = $1 ORDER BY commit_seq, created_at, id LIMIT $2 OFFSET $3`, args)).map(toSnapshot);
      }
      if (filter.newest !== undefined && filter.runId) {
        return (await query(pool, 'SELECT * FROM snapshots WHERE run_id = $1 ORDER BY commit_seq DESC, created_at DESC, id DESC LIMIT $2', [filter.runId, Math.max(0, Math.floor(filter.newest))])).reverse().map(toSnapshot);
      }
      const rows = filter.runId
        ? await query(pool, 'SELECT * FROM snapshots WHERE run_id = $1 ORDER BY commit_seq, created_at, id', [filter.runId])
        : filter.sessionId
          ? await query(pool, 'SELECT * FROM snapshots WHERE session_id = $1 ORDER BY commit_seq, created_at, id', [filter.sessionId])
          : await query(pool, 'SELECT * FROM snapshots ORDER BY created_at, id');
      const out = rows.map(toSnapshot);
      return filter.newest !== undefined ? out.slice(Math.max(0, out.length - Math.floor(filter.newest))) : out;
    },
    async markSnapshotPruned(id, at) {
      await query(pool, 'UPDATE snapshots SET pruned_at = $1 WHERE id = $2 AND pruned_at IS NULL', [at, id]);
    },
    async putWorkspaceManifest(imageId, manifest) {
      await query(
        pool,
        `INSERT INTO workspace_manifests (image_id, manifest_json, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (image_id) DO UPDATE SET manifest_json = excluded.manifest_json, created_at = excluded.created_at`,
        [imageId, json(manifest), Date.now()],
      );
    },
    async getWorkspaceManifest(imageId) {
      const [r] = await query<{ manifest_json: string }>(pool, 'SELECT manifest_json FROM workspace_manifests WHERE image_id = $1', [imageId]);
      return r ? decodeJson(r.manifest_json, { table: 'workspace_manifests', rowId: imageId, field: 'manifest_json' }) : undefined;
    },
  };
}
