import type Database from 'better-sqlite3';
import { faultPoint } from '../../support/faults';
import type { Clock } from '../../support/clock';
import { systemClock } from '../../support/clock';
import type { CommitInput, CommitResult } from '../commit-input';
import type { Store } from '../store';
import { sqliteRunList } from './run-list';
import { sqliteOutput } from './output';
import { CommitWriter } from './commit';
import { GroupCommit, type GroupWrite } from '../commit/group-commit';
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
  // `batch:<label>` sits inside a group's transaction, after that member's writes and before the
  // COMMIT: a test kills the process there to see the whole group rolled back. Armed only by name
  // (never counted by BERTH_FAULT_AT), so the boundaries a crash suite enumerates do not depend on
  // how commits happened to be grouped.
  const groupArmed = process.env.BERTH_FAULT?.startsWith('batch:') ?? false;
  const writer = new CommitWriter(db, groupArmed ? (label) => faultPoint(`batch:${label}`) : undefined);
  const group = new GroupCommit<CommitInput, CommitResult>(async (inputs) => {
    // Another process holds the write lock: wait for it here, asynchronously (short jittered
    // sleeps), not in SQLite's busy handler, which would freeze this process meanwhile; past the
    // usual budget, the blocking wait (and its `database is locked` error) as before.
    const giveUpAt = Date.now() + BUSY_TIMEOUT_MS;
    let result: Awaited<ReturnType<GroupWrite<CommitInput, CommitResult>>> | 'busy';
    for (let pause = 1; (result = writer.tryApplyGroup(inputs, clock.now())) === 'busy' && Date.now() < giveUpAt; pause = Math.min(pause * 2, 16)) {
      await new Promise((r) => setTimeout(r, pause * (0.5 + Math.random())));
    }
    return result === 'busy' ? writer.applyGroup(inputs, clock.now()) : result;
  });
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
      // Commits asked for in the same turn (concurrent runs of this process) share one
      // transaction and one fsync; each still gets its own answer, once the group is durable.
      const result = await group.commit(input);
      if (result.ok) faultPoint(`after:${input.label}`);
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      await group.idle();
      db.close();
    },
  };
}
