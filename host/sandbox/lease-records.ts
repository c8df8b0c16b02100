/**
 * The durable record of a sandbox lease. The store implements {@link LeaseRecords};
 * the sandbox adapter only ever talks to this port, so it never touches SQL.
 */
export interface LeaseRecord {
  id: string;
  sessionId: string;
  hostId: string;
  containerId: string;
  imageDigest: string;
  envFingerprint: string;
  createdAt: number;
  expiresAt: number;
  /** Set once the lease is released; a released lease is never reused. */
  releasedAt: number | null;
}

/** What the sweeper removed and why; kept for operators. */
export interface SweepRecord {
  containerId: string;
  leaseId: string | null;
  hostId: string;
  reason: 'released' | 'expired' | 'unknown';
  at: number;
}

export interface LeaseRecords {
  /**
   * The store's own random id, fixed when the store was created. Every container, network and rule
   * carries it, so a store sweeps only what it made, even beside another store under the same host id.
   */
  storeId(): Promise<string>;
  insertLease(record: LeaseRecord): Promise<void>;
  /** Extends an unreleased lease; false when the lease is released or unknown. */
  heartbeatLease(id: string, expiresAt: number): Promise<boolean>;
  releaseLease(id: string, at: number): Promise<void>;
  getLease(id: string): Promise<LeaseRecord | undefined>;
  listLeases(filter?: { hostId?: string; sessionId?: string; activeAt?: number }): Promise<LeaseRecord[]>;
  recordSweep(record: SweepRecord): Promise<void>;
  listSweeps(filter?: { hostId?: string }): Promise<SweepRecord[]>;
}
