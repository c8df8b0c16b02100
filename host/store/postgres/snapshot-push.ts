import type pg from 'pg';
import type { Store } from '../store';
import { query } from './open';

/** Where an `async` push of a committed snapshot landed (see the SQLite twin): bookkeeping, not a commit. */
export function postgresSnapshotPush(pool: pg.Pool): Pick<Store, 'markSnapshotPushed'> {
  return {
    async markSnapshotPushed(id, registryRef, at) {
      // Compare-and-set: a record already pushed keeps its first reference.
      const rows = await query(pool, 'UPDATE snapshots SET registry_ref = $1, pushed_at = $2 WHERE id = $3 AND registry_ref IS NULL RETURNING id', [registryRef, at, id]);
      return rows.length === 1;
    },
  };
}
