import type Database from 'better-sqlite3';
import { faultPoint } from '../../support/faults';
import type { Clock } from '../../support/clock';
import { systemClock } from '../../support/clock';
import type { CommitInput, CommitResult } from '../commit-input';
import type { Store } from '../store';
import { sqliteRunList } from './run-list';
import { sqliteOutput } from './output';
import { CommitWriter } from './commit';
import { sqliteCommitLog } from './commit-log';
import { sqliteEgressAudit } from './egress';
import { sqliteOwnership } from './ownership';
import { sqliteLeaseRecords } from './leases';
import { BUSY_TIMEOUT_MS, openDatabase, type Durability } from './open';
import { sqliteReads } from './reads';
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
  const db = openDatabase(path, opts.durability);
  const writer = new CommitWriter(db);
  let closed = false;
  return {
    db,
    location: path,
    ...sqliteReads(db),
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
    ...sqliteOwnership(db, clock),
    async commit(input: CommitInput): Promise<CommitResult> {
      faultPoint(`before:${input.label}`);
      // Another process holds the write lock: wait for it here, asynchronously (short jittered
      // sleeps), not in SQLite's busy handler, which would freeze this process meanwhile; past the
      // usual budget, the blocking wait (and its `database is locked` error) as before.
      const giveUpAt = Date.now() + BUSY_TIMEOUT_MS;
      let result: CommitResult | 'busy';
      for (let pause = 1; (result = writer.tryApply(input, clock.now())) === 'busy' && Date.now() < giveUpAt; pause = Math.min(pause * 2, 16)) {
        await new Promise((r) => setTimeout(r, pause * (0.5 + Math.random())));
      }
      if (result === 'busy') result = writer.apply(input, clock.now());
      if (result.ok) faultPoint(`after:${input.label}`);
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}
