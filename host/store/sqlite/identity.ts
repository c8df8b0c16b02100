import Database from 'better-sqlite3';

/**
 * The id of the SQLite store at `path`, read without writing anything; undefined when the file is
 * not a Berth store or cannot be read now. A store re-created at a deleted store's path has an id
 * of its own, which is how `berth gc --orphans` tells the two apart.
 */
export function sqliteStoreIdentity(path: string): string | undefined {
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    return (db.prepare('SELECT id FROM store_identity LIMIT 1').get() as { id?: string } | undefined)?.id;
  } catch {
    return undefined;
  } finally {
    db?.close();
  }
}
