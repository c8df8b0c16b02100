import type pg from 'pg';
import type { RegistryDeleteRecords } from '../registry-deletes';
import { query } from './open';

/** Manifest deletions in the registry (see the SQLite twin). */
export function postgresRegistryDeletes(pool: pg.Pool): RegistryDeleteRecords {
  return {
    async listRegistryDeletes() {
      const rows = await query<{ registry_ref: string; deleted_at: string | number }>(pool, 'SELECT registry_ref, deleted_at FROM registry_deletes', []);
      return rows.map((r) => ({ registryRef: r.registry_ref, deletedAt: Number(r.deleted_at) }));
    },
    async recordRegistryDelete(registryRef, at) {
      await query(pool, 'INSERT INTO registry_deletes (registry_ref, deleted_at) VALUES ($1, $2) ON CONFLICT (registry_ref) DO UPDATE SET deleted_at = excluded.deleted_at', [registryRef, at]);
    },
  };
}
