import type Database from 'better-sqlite3';
import type { Store } from '../store';

/**
 * Where an `async` push of a committed snapshot landed. Not session state (the checkpoint is
 * committed already; this only says the registry holds its image), so not a commit.
 */
export function sqliteSnapshotPush(db: Database.Database): Pick<Store, 'markSnapshotPushed'> {
  // Compare-and-set: a record already pushed keeps its first reference.
  const mark = db.prepare('UPDATE snapshots SET registry_ref = ?, pushed_at = ? WHERE id = ? AND registry_ref IS NULL');
  return {
    async markSnapshotPushed(id, registryRef, at) {
      return mark.run(registryRef, at, id).changes === 1;
    },
  };
}
