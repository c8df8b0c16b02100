import type pg from 'pg';
import { faultPoint } from '../../support/faults';
import type { Clock } from '../../support/clock';
import { systemClock } from '../../support/clock';
import type { CommitInput, CommitResult } from '../commit-input';
import type { Store } from '../store';
import { postgresRunList } from './run-list';
import { postgresOutput } from './output';
import { CommitWriter } from './commit';
import { postgresEgressAudit } from './egress';
import { postgresLeaseRecords } from './leases';
import { openPool, redactUrl } from './open';
import { postgresReads } from './reads';
import { TaskInputs } from '../task-inputs';
import { postgresSnapshots } from './snapshots';
import { postgresSnapshotDeltas } from './snapshot-deltas';
import { postgresSnapshotPush } from './snapshot-push';
import { postgresRegistryDeletes } from './registry-deletes';
import { postgresArtifacts } from './artifacts';
import { postgresForkReads } from './forks';
import { postgresAcceptanceReads } from './acceptance';
import { postgresCostRecords } from './cost';
import { postgresCommitLog } from './commit-log';
import { postgresImportedRuns } from './imported';
import { postgresOwnership } from './ownership';
import type { DbClock } from '../sqlite/ownership';

export interface PostgresStoreOptions {
  clock?: Clock;
  /** Pool size (connections this process may hold). */
  maxConnections?: number;
  /**
   * The database clock of ownership (claims, leases, the fence's lease check, heartbeats); by
   * default the server's, so hosts with skewed clocks agree on leases. Tests that step time set it.
   */
  dbClock?: DbClock;
}

/**
 * A {@link Store} on a PostgreSQL database, for several hosts on one store. Commits run on a
 * pooled connection in one transaction with `synchronous_commit` left at the server's default
 * (on): a commit returns only after its WAL record is flushed, as SQLite's FULL does.
 * `location` is the URL without its password.
 */
export async function openPostgresStore(url: string, opts: PostgresStoreOptions = {}): Promise<Store & { readonly pool: pg.Pool }> {
  const clock = opts.clock ?? systemClock;
  const pool = await openPool(url, { max: opts.maxConnections });
  // `mid:<label>` sits inside the transaction, after its first writes: a test kills the process
  // (or its connection) there to see the transaction rolled back as a whole.
  // Armed only by name (never counted by BERTH_FAULT_AT), so both stores number their boundaries alike.
  const midArmed = process.env.BERTH_FAULT?.startsWith('mid:') ?? false;
  const inputs = new TaskInputs();
  const writer = new CommitWriter(pool, midArmed ? (label) => faultPoint(`mid:${label}`) : undefined, opts.dbClock, inputs);
  let closed = false;
  return {
    pool,
    location: redactUrl(url),
    ...postgresReads(pool, inputs),
    ...postgresLeaseRecords(pool),
    ...postgresSnapshots(pool),
    ...postgresSnapshotDeltas(pool),
    ...postgresEgressAudit(pool),
    ...postgresSnapshotPush(pool),
    ...postgresRegistryDeletes(pool),
    ...postgresArtifacts(pool),
    ...postgresForkReads(pool),
    ...postgresAcceptanceReads(pool),
    ...postgresCostRecords(pool),
    ...postgresCommitLog(pool),
    ...postgresOutput(pool),
    ...postgresRunList(pool),
    ...postgresImportedRuns(pool, redactUrl(url)),
    ...postgresOwnership(pool, opts.dbClock),
    async commit(input: CommitInput): Promise<CommitResult> {
      faultPoint(`before:${input.label}`);
      const result = await writer.apply(input, clock.now());
      if (result.ok) faultPoint(`after:${input.label}`);
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
