import type Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { faultPoint } from '../../support/faults';
import type { Clock } from '../../support/clock';
import { systemClock } from '../../support/clock';
import type { CommitInput, CommitResult } from '../commit-input';
import type { Store } from '../store';
import { sqliteRunList } from './run-list';
import { sqliteOutput } from './output';
import { CommitWriter } from './commit';
import { openCommitConnection } from './commit-connection';
import { SharedSync, walFlush } from './shared-sync';
import { sqliteCommitLog } from './commit-log';
import { sqliteEgressAudit } from './egress';
import { sqliteOwnership } from './ownership';
import { typedBusy } from './busy';
import { sqliteLeaseRecords } from './leases';
import { BUSY_TIMEOUT_MS, openDatabase, type Durability } from './open';
import { cannotWrite, openReadOnlyDatabase, storeReadOnly, unwritableLogFiles, writable } from './read-only';
import { sqliteReads } from './reads';
import { TaskInputs } from '../task-inputs';
import { sqliteImportedRuns } from './imported';
import { sqliteSnapshots } from './snapshots';
import { sqliteSnapshotDeltas } from './snapshot-deltas';
import { sqliteSnapshotPush } from './snapshot-push';
import { sqliteRegistryDeletes } from './registry-deletes';
import { sqliteAcceptanceReads } from './acceptance';
import { sqliteCostRecords } from './cost';
import { sqliteArtifacts } from './artifacts';
import { sqliteForkReads } from './forks';

export interface SqliteStoreOptions {
  clock?: Clock;
  durability?: Durability;
}

/** A {@link Store} on one SQLite file (WAL). One writer process at a time; readers may be many. */
export function openSqliteStore(path: string, opts: SqliteStoreOptions = {}): Store & { readonly db: Database.Database } {
  const clock = opts.clock ?? systemClock;
  const { db, readOnly } = openForThisUser(path, opts.durability);
  // Commits are flushed to disk together (shared-sync.ts): each is applied in its call without a
  // flush of its own, and answered after one flush shared with the commits applied beside it. A
  // store opened at `normal` durability (or in memory) answers at once, as before.
  const flushed = (opts.durability ?? 'full') === 'full' && path !== ':memory:' && !readOnly;
  const wal = walFlush(path);
  const shared = new SharedSync(wal.flush, wal.flushNow);
  const commitDb = flushed ? openCommitConnection(path) : null;
  const inputs = new TaskInputs();
  const writer = commitDb ? new CommitWriter(commitDb, undefined, true, inputs) : new CommitWriter(db, undefined, false, inputs);
  /**
   * A small write of the ownership records (claim, renew, release, a worker's beat), as a commit is
   * written: on the commit connection, never sleeping in SQLite's busy handler (another process's
   * write lock is waited for here, asynchronously), answered after a flush it shares with the
   * commits beside it. Two workers on one file each froze ~2 ms per claim and per release in a
   * flush of their own, holding the write lock the other worker's commits waited for.
   */
  async function ownershipWrite<T>(apply: () => T): Promise<T> {
    let out: T;
    if (!commitDb) {
      try {
        out = apply();
      } catch (err) {
        throw typedBusy(path, err);
      }
    } else {
      const giveUpAt = Date.now() + BUSY_TIMEOUT_MS;
      for (let pause = 1; ; pause = Math.min(pause * 2, 16)) {
        try {
          if (Date.now() < giveUpAt) out = apply();
          else {
            // Past the usual budget: the blocking wait (and its `database is locked` error), as a commit does.
            commitDb.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
            try {
              out = apply();
            } finally {
              commitDb.pragma('busy_timeout = 0');
            }
          }
          break;
        } catch (err) {
          if ((err as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() >= giveUpAt) throw typedBusy(path, err);
        }
        await new Promise((r) => setTimeout(r, pause * (0.5 + Math.random())));
      }
    }
    if (flushed) await shared.after();
    return out;
  }
  // `unflushed:<label>` sits between a commit's apply and its flush: a test kills the process there.
  // Armed only by name (never counted by BERTH_FAULT_AT), so the boundaries a crash suite
  // enumerates stay the same.
  const unflushedArmed = process.env.BERTH_FAULT?.startsWith('unflushed:') ?? false;
  let closed = false;
  return {
    db,
    location: path,
    readOnly,
    ...sqliteReads(db, inputs),
    ...sqliteLeaseRecords(db),
    ...sqliteSnapshots(db),
    ...sqliteSnapshotDeltas(db),
    ...sqliteSnapshotPush(db),
    ...sqliteRegistryDeletes(db),
    ...sqliteArtifacts(db),
    ...sqliteForkReads(db),
    ...sqliteEgressAudit(db),
    ...sqliteAcceptanceReads(db),
    ...sqliteCostRecords(db),
    ...sqliteCommitLog(db),
    ...sqliteOutput(db),
    ...sqliteRunList(db),
    ...sqliteImportedRuns(db),
    ...sqliteOwnership(db, clock, { db: commitDb ?? db, write: ownershipWrite }),
    async commit(input: CommitInput): Promise<CommitResult> {
      if (readOnly) throw storeReadOnly(path, `the commit "${input.label}"`);
      faultPoint(`before:${input.label}`);
      // Another process holds the write lock: wait for it here, asynchronously (short jittered
      // sleeps), not in SQLite's busy handler, which would freeze this process meanwhile; past the
      // usual budget, the blocking wait (and its `database is locked` error) as before.
      const giveUpAt = Date.now() + BUSY_TIMEOUT_MS;
      let result: CommitResult | 'busy';
      for (let pause = 1; (result = writer.tryApply(input, clock.now())) === 'busy' && Date.now() < giveUpAt; pause = Math.min(pause * 2, 16)) {
        await new Promise((r) => setTimeout(r, pause * (0.5 + Math.random())));
      }
      if (result === 'busy') {
        try {
          result = writer.apply(input, clock.now());
        } catch (err) {
          throw typedBusy(path, err);
        }
      }
      if (result.ok && flushed) {
        if (unflushedArmed) faultPoint(`unflushed:${input.label}`);
        await shared.after();
      }
      if (result.ok) faultPoint(`after:${input.label}`);
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      await shared.idle();
      commitDb?.close();
      db.close();
      wal.close();
    },
  };
}

/**
 * The store as this process may use it: read-write, or, when it may not write the file, its
 * directory or the mount it is on, read-only (`readOnly`: commits are refused as `store_read_only`,
 * and the CLI refuses a command that writes before it starts).
 */
function openForThisUser(path: string, durability: Durability | undefined): { db: Database.Database; readOnly: boolean } {
  // A file this user may not write is opened read-only at once: opened read-write, SQLite falls
  // back to reading it and still creates the `-wal` and `-shm` files in a directory this user may
  // write, owned by this user and with the store's mode, which the store's owner then cannot write:
  // its next commit failed (`attempt to write a readonly database`).
  // A store whose `-wal`/`-shm` another user made (a reader of an older berth) is read-only here
  // too: SQLite would open it read-write and fail at the first commit.
  if (path !== ':memory:' && statSync(path, { throwIfNoEntry: false })?.isFile() && (!writable(path) || unwritableLogFiles(path).length)) return { db: openReadOnlyDatabase(path), readOnly: true };
  try {
    const db = openDatabase(path, durability);
    return { db, readOnly: path !== ':memory:' && !writable(path) };
  } catch (err) {
    if (path === ':memory:' || !cannotWrite(err)) throw err;
    return { db: openReadOnlyDatabase(path), readOnly: true };
  }
}
