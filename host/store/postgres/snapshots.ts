import type pg from 'pg';
import type { Store } from '../store';
import { decodeJson } from '../stored-json';
import { json, toSnapshot } from './rows';
import { query } from './open';
import { stateFilter } from '../sqlite/snapshots';

type SnapshotMethods = Pick<Store, 'getSnapshot' | 'listSnapshots' | 'snapshotTotals' | 'markSnapshotPruned' | 'putWorkspaceManifest' | 'getWorkspaceManifest'>;

/** Snapshot reads and the non-session bookkeeping beside them (see the SQLite twin). */
export function postgresSnapshots(pool: pg.Pool): SnapshotMethods {
  return {
    async getSnapshot(id) {
      const [r] = await query(pool, 'SELECT * FROM snapshots WHERE id = $1', [id]);
      return r ? toSnapshot(r) : undefined;
    },
    async listSnapshots(filter) {
      const [where, args] = filter.runId ? ['run_id = $1', [filter.runId]] : filter.sessionId ? ['session_id = $1', [filter.sessionId]] : ['TRUE', []];
      const cond = `${where}${stateFilter(filter)}`;
      const order = filter.runId || filter.sessionId ? 'commit_seq, created_at, id' : 'created_at, id';
      const n = args.length;
      if (filter.page && filter.newest === undefined && (filter.runId || filter.sessionId)) {
        const page = [Math.max(0, Math.floor(filter.page.limit)), Math.max(0, Math.floor(filter.page.offset))];
        return (await query(pool, `SELECT * FROM snapshots WHERE ${cond} ORDER BY ${order} LIMIT $${n + 1} OFFSET $${n + 2}`, [...args, ...page])).map(toSnapshot);
      }
      if (filter.newest !== undefined && filter.runId) {
        return (await query(pool, `SELECT * FROM snapshots WHERE ${cond} ORDER BY commit_seq DESC, created_at DESC, id DESC LIMIT $${n + 1}`, [...args, Math.max(0, Math.floor(filter.newest))])).reverse().map(toSnapshot);
      }
      const out = (await query(pool, `SELECT * FROM snapshots WHERE ${cond} ORDER BY ${order}`, args)).map(toSnapshot);
      return filter.newest !== undefined ? out.slice(Math.max(0, out.length - Math.floor(filter.newest))) : out;
    },
    async snapshotTotals() {
      // SUM of a BIGINT is a NUMERIC, which pg hands over as a string.
      const [r] = await query<{ pushed: number; unpushed: number; bytes: string }>(pool, 'SELECT COUNT(registry_ref) AS pushed, COUNT(*) - COUNT(registry_ref) AS unpushed, COALESCE(SUM(CASE WHEN registry_ref IS NOT NULL THEN size_bytes END), 0) AS bytes FROM snapshots WHERE pruned_at IS NULL');
      return { pushed: Number(r!.pushed), unpushed: Number(r!.unpushed), pushedBytes: Number(r!.bytes) };
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
