import Database from 'better-sqlite3';
import { BerthError } from '../../errors';
import { CACHE_KB } from './open';

/**
 * The connection a store's commits are written through when they are flushed together
 * (shared-sync.ts): a second connection to the same file, set up once for that: its writes reach
 * the WAL without a flush of their own (`synchronous = NORMAL`; the shared flush fsyncs the WAL
 * before any caller is answered) and it never sleeps in SQLite's busy handler (`busy_timeout = 0`;
 * the store waits for another process's lock asynchronously). On the store's main connection each
 * commit switched both pragmas there and back, four statements prepared per commit.
 *
 * Both connections are this process's: neither holds the write lock across an await (every write
 * is one synchronous transaction), so they never wait for each other; a read on the main
 * connection after a commit returned sees it (WAL: each read transaction starts from the newest
 * committed frame). Opened after the main connection migrated the schema.
 */
export function openCommitConnection(path: string): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (cause) {
    throw new BerthError('store_open_failed', `cannot open store ${path}: ${(cause as Error).message}`, { cause });
  }
  db.pragma('busy_timeout = 0');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  // The reads' connection's bound, not better-sqlite3's 16 MB: this connection is the store's only
  // writer, so nothing invalidates its cache and it may keep every page a long run's commits touch.
  // At 3,000 steps no difference was visible in the host's memory (bench/RESULTS.md, session 20: a
  // commit touches the few pages at the lists' ends); the bound keeps it so for any store size.
  db.pragma(`cache_size = -${CACHE_KB}`);
  return db;
}
