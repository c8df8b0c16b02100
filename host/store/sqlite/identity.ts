import type Database from 'better-sqlite3';
import { openReadOnlyDatabase } from './read-only';

/*
 * Both read another store's file as `berth gc --orphans` finds it, creating nothing beside it: a
 * plain read-only open of a WAL store made its -wal and -shm files and left them (root's, when gc
 * ran as root), and the store's owner could then no longer write it.
 */

/**
 * The id of the SQLite store at `path`, read without writing anything; undefined when the file is
 * not a Berth store or cannot be read now. A store re-created at a deleted store's path has an id
 * of its own, which is how `berth gc --orphans` tells the two apart.
 */
export function sqliteStoreIdentity(path: string): string | undefined {
  let db: Database.Database | undefined;
  try {
    db = openReadOnlyDatabase(path);
    return (db.prepare('SELECT id FROM store_identity LIMIT 1').get() as { id?: string } | undefined)?.id;
  } catch {
    return undefined;
  } finally {
    db?.close();
  }
}

/**
 * Which of `imageIds` an unpruned snapshot record of the SQLite store at `path` names (its own
 * runs' and imported ones'), read without writing anything; undefined when it cannot be read. How
 * `berth gc --orphans` keeps a deleted store's snapshot image that a store that exists still needs
 * (imported, or pulled from a registry: the image keeps the labels of the store that committed it).
 */
export function sqliteImagesNamed(path: string, imageIds: readonly string[]): Set<string> | undefined {
  return namedUnpruned(path, 'image_id', imageIds);
}

/**
 * Which of `snapshotIds` the SQLite store at `path` records unpruned, read without writing
 * anything; undefined when it cannot be read. How `berth gc --orphans` keeps a deleted store's
 * snapshot tag on an environment's image that a store that exists records (an imported run keeps
 * its snapshot ids): the image id cannot say it, every store run on that environment names it.
 */
export function sqliteSnapshotsNamed(path: string, snapshotIds: readonly string[]): Set<string> | undefined {
  return namedUnpruned(path, 'id', snapshotIds);
}

/** The `values` an unpruned snapshot row of the store at `path` holds in `column` (one of the two above, never input). */
function namedUnpruned(path: string, column: 'id' | 'image_id', values: readonly string[]): Set<string> | undefined {
  let db: Database.Database | undefined;
  try {
    db = openReadOnlyDatabase(path);
    const named = db.prepare(`SELECT 1 FROM snapshots WHERE ${column} = ? AND pruned_at IS NULL LIMIT 1`);
    return new Set(values.filter((v) => named.get(v) !== undefined));
  } catch {
    return undefined;
  } finally {
    db?.close();
  }
}
