import type Database from 'better-sqlite3';
import type { Store } from '../store';
import { decodeJson } from '../stored-json';
import { json, toSnapshot, type Row } from './rows';

type SnapshotMethods = Pick<Store, 'getSnapshot' | 'listSnapshots' | 'markSnapshotPruned' | 'putWorkspaceManifest' | 'getWorkspaceManifest'>;

/** Snapshot records are written by commits; these are their reads and the non-session bookkeeping beside them. */
export function sqliteSnapshots(db: Database.Database): SnapshotMethods {
  const get = db.prepare('SELECT * FROM snapshots WHERE id = ?');
  const byRun = db.prepare('SELECT * FROM snapshots WHERE run_id = ? ORDER BY commit_seq, created_at, id');
  const newestByRun = db.prepare('SELECT * FROM snapshots WHERE run_id = ? ORDER BY commit_seq DESC, created_at DESC, id DESC LIMIT ?');
  const bySession = db.prepare('SELECT * FROM snapshots WHERE session_id = ? ORDER BY commit_seq, created_at, id');
  const byRunPage = db.prepare('SELECT * FROM snapshots WHERE run_id = ? ORDER BY commit_seq, created_at, id LIMIT ? OFFSET ?');
  const bySessionPage = db.prepare('SELECT * FROM snapshots WHERE session_id = ? ORDER BY commit_seq, created_at, id LIMIT ? OFFSET ?');
  const all = db.prepare('SELECT * FROM snapshots ORDER BY created_at, id');
  const prune = db.prepare('UPDATE snapshots SET pruned_at = ? WHERE id = ? AND pruned_at IS NULL');
  const putManifest = db.prepare('INSERT OR REPLACE INTO workspace_manifests (image_id, manifest_json, created_at) VALUES (?, ?, ?)');
  const getManifest = db.prepare('SELECT manifest_json FROM workspace_manifests WHERE image_id = ?');
  return {
    async getSnapshot(id) {
      const r = get.get(id) as Row | undefined;
      return r ? toSnapshot(r) : undefined;
    },
    async listSnapshots(filter) {
      const page = filter.page && filter.newest === undefined ? [Math.max(0, Math.floor(filter.page.limit)), Math.max(0, Math.floor(filter.page.offset))] : undefined;
      if (page && filter.runId) return (byRunPage.all(filter.runId, ...page) as Row[]).map(toSnapshot);
      if (page && filter.sessionId) return (bySessionPage.all(filter.sessionId, ...page) as Row[]).map(toSnapshot);
      if (filter.newest !== undefined && filter.runId) return (newestByRun.all(filter.runId, Math.max(0, Math.floor(filter.newest))) as Row[]).reverse().map(toSnapshot);
      const rows = filter.runId ? byRun.all(filter.runId) : filter.sessionId ? bySession.all(filter.sessionId) : all.all();
      const out = (rows as Row[]).map(toSnapshot);
      return filter.newest !== undefined ? out.slice(Math.max(0, out.length - Math.floor(filter.newest))) : out;
    },
    async markSnapshotPruned(id, at) {
      prune.run(at, id);
    },
    async putWorkspaceManifest(imageId, manifest) {
      putManifest.run(imageId, json(manifest), Date.now());
    },
    async getWorkspaceManifest(imageId) {
      const r = getManifest.get(imageId) as { manifest_json: string } | undefined;
      return r ? decodeJson(r.manifest_json, { table: 'workspace_manifests', rowId: imageId, field: 'manifest_json' }) : undefined;
    },
  };
}
