import type Database from 'better-sqlite3';

/**
 * Runs `write` (one transaction or statement) committed to the WAL without its own fsync
 * (`synchronous = NORMAL` for this write only), then restores the store's durability. It is
 * durable as soon as the next synced commit is: WAL frames are appended and synced in order, so
 * that commit's fsync carries this write too, and no synced record written after it can survive a
 * machine crash without it. A process crash never loses it (the frame is in the OS's cache).
 * On a store opened at `normal` durability it is an ordinary write.
 */
export function deferredSync(db: Database.Database): <T>(write: () => T) => T {
  const durable = db.pragma('synchronous', { simple: true }) as number;
  return (write) => {
    if (durable < 2) return write();
    db.pragma('synchronous = NORMAL');
    try {
      return write();
    } finally {
      db.pragma(`synchronous = ${durable}`);
    }
  };
}
