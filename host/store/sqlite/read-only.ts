import Database from 'better-sqlite3';
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { BerthError } from '../../errors';
import { NEWEST_SCHEMA_VERSION, SCHEMA_VERSIONS, storeTooNew } from '../schema-versions';

// SQLite reads `immutable=1` only from a URI filename, which better-sqlite3 allows when this is set
// as its addon loads (at the first open, after every module's start). A path Berth opens is
// absolute, so no other store name ever reads as a URI.
process.env.SQLITE_USE_URI ??= '1';

/** True when an open failed only because this process may not write the store (file, directory or mount). */
export function cannotWrite(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 3; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && (e.code.startsWith('SQLITE_READONLY') || e.code === 'SQLITE_CANTOPEN')) return true;
  }
  return false;
}

/** True when this process may write the store file (a store that opened may still be read-only to it). */
export function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The store's `-wal` and `-shm` files that exist and this user may not write: left by another user
 * who read the store with a berth that let SQLite create them. Through them SQLite can only read,
 * so the store is read-only to this user too until they are gone.
 */
export function unwritableLogFiles(path: string): string[] {
  return [`${path}-wal`, `${path}-shm`].filter((f) => existsSync(f) && !writable(f));
}

/**
 * `store_read_only`: a command that writes, on a store this process can only read. Reading
 * commands work on it (they open it read-only); the fix is the store's permissions, not Berth's.
 */
export function storeReadOnly(path: string, what: string): BerthError {
  const logs = writable(path) ? unwritableLogFiles(path) : [];
  const why = logs.length
    ? `its ${logs.join(' and ')} belong to another user, who read the store with an older berth, and this user may not write them`
    : `the file or its directory ${dirname(path)} cannot be written`;
  const fix = logs.length
    ? `remove ${logs.join(' and ')} while no berth reads the store (an empty -wal holds no commit), or have their owner do it`
    : 'run the rest as the store\'s owner or make it writable';
  return new BerthError(
    'store_read_only',
    `store ${path} is read-only for this user (${why}): ${what} writes to it. ` +
      `berth status, show, logs, artifacts, export, check, tree, cost and workers read it as it is; ${fix}`,
    { details: { path, ...(logs.length ? { files: logs } : {}) } },
  );
}

/**
 * The store opened for reading only, when this process cannot write it. With no `-wal` file there
 * is no write-ahead log to read (the last connection folded it into the file and removed it), so
 * the file alone is the whole store and is opened `immutable`, creating nothing. With a `-wal` file
 * (a host writing now, or one killed) the log is read through the `-shm` file already there, which
 * SQLite is told never to create (`readonly_shm`): made by this user in a directory it may write,
 * it would carry the store's mode and this user as owner, and the store's owner could not write it
 * (its next commit failed: `attempt to write a readonly database`). A store whose schema this
 * build would migrate is refused: migrating is a write.
 */
export function openReadOnlyDatabase(path: string): Database.Database {
  const wal = existsSync(`${path}-wal`);
  const name = `file:${path.replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16)}`)}?${wal ? 'readonly_shm=1' : 'immutable=1'}`;
  let db: Database.Database;
  try {
    db = new Database(name, { readonly: true, fileMustExist: true });
    db.prepare('SELECT 1 FROM sqlite_master LIMIT 1').all();
  } catch (cause) {
    const why = !wal ? '' : existsSync(`${path}-shm`) ? ' (its write-ahead log is unreadable to this user)' : ` (its write-ahead log ${path}-wal has no ${path}-shm beside it, which this user does not create: the store's owner could not write it; one berth command run by the owner, such as berth status, folds the log into the store)`;
    throw new BerthError('store_open_failed', `cannot open store ${path} for reading: ${(cause as Error).message}${why}`, { cause, details: { path } });
  }
  try {
    refuseUnmigrated(db, path);
  } catch (err) {
    db.close();
    throw err;
  }
  db.pragma('foreign_keys = ON');
  return db;
}

function refuseUnmigrated(db: Database.Database, path: string): void {
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as Array<{ name: string }>).map((r) => r.name);
  // An empty file (or /proc's) is no store of an older berth: a store would be made in it, a write.
  if (tables.length === 0) throw new BerthError('store_not_berth', `${path} is not a Berth store: it holds no tables, and this user cannot write it to make one there; it was left as it was`, { details: { path } });
  const hasTable = tables.includes('schema_migrations');
  if (!hasTable) throw new BerthError('store_not_berth', `${path} is not a Berth store: it is another program's SQLite database (tables ${tables.slice(0, 5).join(', ')}); it was left as it was`, { details: { path, tables } });
  const applied = new Set(hasTable ? (db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>).map((r) => r.version) : []);
  const unknown = [...applied].filter((v) => v > NEWEST_SCHEMA_VERSION);
  if (unknown.length > 0) throw storeTooNew(path, Math.max(...unknown));
  const pending = SCHEMA_VERSIONS.filter((m) => !applied.has(m.version)).map((m) => m.version);
  if (pending.length === 0) return;
  throw new BerthError(
    'store_read_only',
    `store ${path} is read-only for this user and its schema is older than this berth reads (it needs schema version(s) ${pending.join(', ')}, which berth adds when it can write the store): ` +
      'run one berth command as the store\'s owner (berth status), or read it with the berth that wrote it',
    { details: { path, pending } },
  );
}
