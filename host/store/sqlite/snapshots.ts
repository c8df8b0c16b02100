import type Database from 'better-sqlite3';
import type { Store } from '../store';
import { decodeJson } from '../stored-json';
import { json, toSnapshot, type Row } from './rows';

type SnapshotMethods = Pick<Store, 'getSnapshot' | 'listSnapshots' | 'snapshotTotals' | 'markSnapshotPruned' | 'putWorkspaceManifest' | 'getWorkspaceManifest'>;

/** The SQL of `listSnapshots`' `pruned` and `pushed` filters (the same on PostgreSQL). */
export function stateFilter(f: { pruned?: boolean; pushed?: true }): string {
  return `${f.pruned === true ? ' AND pruned_at IS NOT NULL' : f.pruned === false ? ' AND pruned_at IS NULL' : ''}${f.pushed ? ' AND registry_ref IS NOT NULL' : ''}`;
}

/** Snapshot records are written by commits; these are their reads and the non-session bookkeeping beside them. */
export function sqliteSnapshots(db: Database.Database): SnapshotMethods {
  const get = db.prepare('SELECT * FROM snapshots WHERE id = ?');
  // One statement per shape of filter, prepared on first use (a handful: by run, session or all, each with or without a page and the state filters).
  const prepared = new Map<string, Database.Statement>();
  const stmt = (sql: string) => prepared.get(sql) ?? prepared.set(sql, db.prepare(sql)).get(sql)!;
  const totals = db.prepare('SELECT COUNT(registry_ref) AS pushed, COUNT(*) - COUNT(registry_ref) AS unpushed, COALESCE(SUM(CASE WHEN registry_ref IS NOT NULL THEN size_bytes END), 0) AS bytes FROM snapshots WHERE pruned_at IS NULL');
  const prune = db.prepare('UPDATE snapshots SET pruned_at = ? WHERE id = ? AND pruned_at IS NULL');
  const putManifest = db.prepare('INSERT OR REPLACE INTO workspace_manifests (image_id, manifest_json, created_at) VALUES (?, ?, ?)');
  const getManifest = db.prepare('SELECT manifest_json FROM workspace_manifests WHERE image_id = ?');
  return {
    async getSnapshot(id) {
      const r = get.get(id) as Row | undefined;
      return r ? toSnapshot(r) : undefined;
    },
    async listSnapshots(filter) {
      const [where, args] = filter.runId ? ['run_id = ?', [filter.runId]] : filter.sessionId ? ['session_id = ?', [filter.sessionId]] : ['1 = 1', []];
      const cond = `${where}${stateFilter(filter)}`;
      const order = filter.runId || filter.sessionId ? 'commit_seq, created_at, id' : 'created_at, id';
      const page = filter.page && filter.newest === undefined && (filter.runId || filter.sessionId) ? [Math.max(0, Math.floor(filter.page.limit)), Math.max(0, Math.floor(filter.page.offset))] : undefined;
      if (page) return (stmt(`SELECT * FROM snapshots WHERE ${cond} ORDER BY ${order} LIMIT ? OFFSET ?`).all(...args, ...page) as Row[]).map(toSnapshot);
      if (filter.newest !== undefined && filter.runId) {
        return (stmt(`SELECT * FROM snapshots WHERE ${cond} ORDER BY commit_seq DESC, created_at DESC, id DESC LIMIT ?`).all(...args, Math.max(0, Math.floor(filter.newest))) as Row[]).reverse().map(toSnapshot);
      }
      const out = (stmt(`SELECT * FROM snapshots WHERE ${cond} ORDER BY ${order}`).all(...args) as Row[]).map(toSnapshot);
      return filter.newest !== undefined ? out.slice(Math.max(0, out.length - Math.floor(filter.newest))) : out;
    },
    async snapshotTotals() {
      const r = totals.get() as { pushed: number; unpushed: number; bytes: number };
      return { pushed: r.pushed, unpushed: r.unpushed, pushedBytes: r.bytes };
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
