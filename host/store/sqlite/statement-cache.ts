import type Database from 'better-sqlite3';

/** Distinct filter shapes are few (one per combination of set filters); the bound only guards against a caller that builds many. */
const LIMIT = 256;
const caches = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/**
 * A statement for SQL whose shape depends on the filters given, prepared once per database and
 * text: preparing it on every call was a quarter of `berth check`'s time (20 reads per run).
 */
export function preparedFor(db: Database.Database, sql: string): Database.Statement {
  let cache = caches.get(db);
  if (!cache) caches.set(db, (cache = new Map()));
  let stmt = cache.get(sql);
  if (!stmt) {
    if (cache.size >= LIMIT) cache.delete(cache.keys().next().value!);
    stmt = db.prepare(sql);
    cache.set(sql, stmt);
  }
  return stmt;
}
