/**
 * The durable record of a sandbox lease. The store implements {@link LeaseRecords};
 * the sandbox adapter only ever talks to this port, so it never touches SQL.
 */
export interface LeaseRecord {
  id: string;
  sessionId: string;
  hostId: string;
  /**
   * Empty while the lease is an intent: recorded before its container is created, so a host that
   * dies in between leaves a record a later one finds (the container carries `berth.lease`).
   */
  containerId: string;
  imageDigest: string;
  envFingerprint: string;
  createdAt: number;
  expiresAt: number;
  /** Set once the lease is released; a released lease is never reused. */
  releasedAt: number | null;
  /**
   * What the sandbox serves: a run id (released when that run ends), or an agent session's id (the
   * session keeps its sandbox across runs). Null for pool leases taken without one and old records.
   */
  runId: string | null;
  /**
   * The ownership epoch the sandbox is held under: the one it was leased under (also its
   * `berth.epoch` label), raised when a new owner adopts it after stopping every command an older
   * epoch started in it. Null for sandboxes leased without an owner (a pool, old records).
   */
  epoch?: number | null;
}

/** What the sweeper removed and why; kept for operators. */
export interface SweepRecord {
  containerId: string;
  leaseId: string | null;
  hostId: string;
  /** `run_ended`: the run the lease served reached a final state. */
  reason: 'released' | 'expired' | 'unknown' | 'run_ended' | 'stale_epoch';
  at: number;
}

export interface LeaseRecords {
  /**
   * The store's own random id, fixed when the store was created. Every container, network and rule
   * carries it, so a store sweeps only what it made, even beside another store under the same host id.
   */
  storeId(): Promise<string>;
  /**
   * `sync: 'with-next-commit'` lets a store skip the flush of this write alone: it is durable once
   * the next durable write of the store is (SQLite WAL frames are synced in order, as is a
   * PostgreSQL WAL), and a process crash never loses it. For a record nothing else can point at
   * until a later write does. A store may always flush (PostgreSQL does).
   */
  insertLease(record: LeaseRecord, opts?: { sync?: 'now' | 'with-next-commit' }): Promise<void>;
  /** Names the container of a lease recorded as an intent; false when it already has one. */
  setLeaseContainer(id: string, containerId: string): Promise<boolean>;
  /** Extends an unreleased lease; false when the lease is released or unknown. */
  heartbeatLease(id: string, expiresAt: number): Promise<boolean>;
  /** Raises the lease's epoch to `epoch` (a new owner adopted the sandbox); false when released, unknown or already there. */
  adoptLease(id: string, epoch: number): Promise<boolean>;
  releaseLease(id: string, at: number): Promise<void>;
  getLease(id: string): Promise<LeaseRecord | undefined>;
  listLeases(filter?: { hostId?: string; sessionId?: string; runId?: string; activeAt?: number; unreleased?: boolean }): Promise<LeaseRecord[]>;
  recordSweep(record: SweepRecord): Promise<void>;
  /** The sweep log, oldest first: every container a sweeper removed (by the host that swept, or of one lease). */
  listSweeps(filter?: { hostId?: string; leaseId?: string }): Promise<SweepRecord[]>;
}
