import type Database from 'better-sqlite3';
import type { RegistryDeleteRecords } from '../registry-deletes';

/** Manifest deletions in the registry (see {@link RegistryDeleteRecords}). */
export function sqliteRegistryDeletes(db: Database.Database): RegistryDeleteRecords {
  const list = db.prepare('SELECT registry_ref, deleted_at FROM registry_deletes');
  const put = db.prepare('INSERT INTO registry_deletes (registry_ref, deleted_at) VALUES (?, ?) ON CONFLICT (registry_ref) DO UPDATE SET deleted_at = excluded.deleted_at');
  return {
    async listRegistryDeletes() {
      return (list.all() as Array<{ registry_ref: string; deleted_at: number }>).map((r) => ({ registryRef: r.registry_ref, deletedAt: r.deleted_at }));
    },
    async recordRegistryDelete(registryRef, at) {
      put.run(registryRef, at);
    },
  };
}
