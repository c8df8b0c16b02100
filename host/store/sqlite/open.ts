import Database from 'better-sqlite3';
import { closeSync, existsSync, openSync, statSync, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';
import { BerthError } from '../../errors';
import { makeDirectories } from '../../support/make-dirs';
import { NEWEST_SCHEMA_VERSION, SCHEMA_VERSIONS, storeTooNew } from '../schema-versions';

/** How long a statement waits for another process's lock before it fails. */
export const BUSY_TIMEOUT_MS = 5000;

/** SQLite's page cache per connection, in KiB (each connection a store opens: its reads' and its commits'). */
export const CACHE_KB = 2000;

/** How hard each commit is pushed to disk. */
export type Durability = 'full' | 'normal';

/**
 * Opens (creating if needed) a Berth database and brings its schema up to date.
 *
 * WAL with `synchronous = FULL` is the default: a commit returns only after its WAL frame is
 * fsynced. A process crash alone would be covered by NORMAL (the WAL lives in the OS page cache),
 * but the tool-call protocol acts on the outside world right after an intent commit; if a power
 * loss could drop that intent, recovery would not know the action was attempted and could send it
 * again. FULL keeps "intent durable before action" true for machine crashes too.
 */
export function openDatabase(path: string, durability: Durability = 'full'): Database.Database {
  if (path !== ':memory:') {
    const st = statSync(path, { throwIfNoEntry: false });
    if (st?.isDirectory()) {
      throw new BerthError('store_open_failed', `cannot open store ${path}: it is a directory; a store is a SQLite file (such as ${join(path, 'berth.db')}) or a postgres:// URL`, { details: { path } });
    }
    // SQLite cannot lock a device or a pipe: it failed with "database is locked", naming nothing.
    if (st && !st.isFile()) throw new BerthError('store_open_failed', `cannot open store ${path}: it is not a regular file (${fileKind(st)}); a store is a SQLite file or a postgres:// URL`, { details: { path } });
    makeDirectories(dirname(path), 'store_open_failed', `store ${path}`);
    // Created 0600 before SQLite sees it: SQLite gives the WAL and shared-memory files the main
    // file's mode, and the store holds run output that only its owner should read.
    if (!existsSync(path)) createStoreFile(path);
  }
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (cause) {
    throw new BerthError('store_open_failed', `cannot open store ${path}: ${(cause as Error).message}`, { cause });
  }
  // First: another process (a host committing, a CLI reading status) may hold a lock briefly, and
  // even switching to WAL or reading the schema must wait for it rather than fail.
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  refuseForeign(db, path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma('foreign_keys = ON');
    // SQLite's own default page cache (2 MB) rather than better-sqlite3's build default (16 MB): the
    // cache filled with the store's pages as a long run's rows were read and written, so a host's
    // memory grew with the store's size up to 16 MB per connection (a 3,000-step run's 18 MB store:
    // `berth export` 120 against 131 MB peak RSS, bench/RESULTS.md session 18). The OS page cache
    // keeps the file's pages either way; a commit touches the few pages at the lists' ends.
    db.pragma(`cache_size = -${CACHE_KB}`);
    migrate(db, path);
  } catch (err) {
    // A store this process may not write fails here (a rollback-mode file's switch to WAL, a
    // migration): the caller may open it read-only instead, so this connection must not linger.
    db.close();
    throw err;
  }
  return db;
}

/**
 * A `--store` that names some other file must not become a store: SQLite would add Berth's tables
 * to another program's database, and a file that is no database at all fails at its first read
 * with an error that names neither the store nor the path. Nothing is written to either.
 */
function refuseForeign(db: Database.Database, path: string): void {
  let tables: string[];
  try {
    tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name);
  } catch (cause) {
    db.close();
    if ((cause as { code?: string }).code !== 'SQLITE_NOTADB') throw new BerthError('store_open_failed', `cannot open store ${path}: ${(cause as Error).message}`, { cause, details: { path } });
    throw new BerthError('store_not_berth', `${path} is not a Berth store: it is not an SQLite database (was --store meant to name another file?); it was left as it was`, { cause, details: { path } });
  }
  if (tables.length === 0 || tables.includes('schema_migrations')) return;
  db.close();
  const shown = tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, ... (${tables.length} in all)` : '');
  throw new BerthError('store_not_berth', `${path} is not a Berth store: it is another program's SQLite database (tables ${shown}); it was left as it was`, { details: { path, tables } });
}

function migrate(db: Database.Database, path: string): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
  );
  const applied = new Set(
    (db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>).map((r) => r.version),
  );
  const unknown = [...applied].filter((v) => v > NEWEST_SCHEMA_VERSION);
  if (unknown.length > 0) throw storeTooNew(path, Math.max(...unknown));
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const done = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?');
  for (const m of SCHEMA_VERSIONS) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      // Asked again under the write lock: processes opening one fresh store at once (parallel
      // `berth run`s of a CI job) all read "nothing applied" above, and all but the first failed
      // with "duplicate column name" or "table ... already exists" applying what it had applied.
      if (done.get(m.version)) return;
      db.exec(m.sqlite);
      record.run(m.version, m.name, Date.now());
    }).immediate();
  }
}

function fileKind(st: Stats): string {
  return st.isCharacterDevice() ? 'a character device' : st.isBlockDevice() ? 'a block device' : st.isFIFO() ? 'a named pipe' : st.isSocket() ? 'a socket' : 'not a file';
}

function createStoreFile(path: string): void {
  try {
    closeSync(openSync(path, 'a', 0o600));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'EACCES' || code === 'EPERM' ? `this user may not write ${dirname(path)}` : code === 'EROFS' ? `${dirname(path)} is on a read-only file system` : (err as Error).message;
    throw new BerthError('store_open_failed', `cannot create store ${path}: ${why}; name a store in a directory you can write with --store PATH`, { details: { path }, cause: err });
  }
}
