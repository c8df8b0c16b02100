/** The fencing scope of a session's ownership row: the only scope a commit of that session may be fenced by. */
export const sessionScope = (sessionId: string): string => `session:${sessionId}`;

/** The owner of one session's runs (per run for plan runs: one run per session), as the store last heard from it. */
export interface SessionOwner {
  sessionId: string;
  /** Bumped by every claim; commits fenced with an older one are refused. */
  epoch: number;
  /** The host id of the owner, and its process id on that machine. */
  holder: string;
  pid: number | null;
  takenAt: number;
  heartbeatAt: number;
  /** Database-clock time until which the claim holds without a renewal. */
  leaseUntil: number;
  /** Set by a clean release (drain, run end); null while owned. */
  stoppedAt: number | null;
}

/** A claim: taken (with the new epoch and whom it was taken from), or refused because a live owner holds it. */
export type ClaimResult = { ok: true; epoch: number; previous: SessionOwner | null; now: number } | { ok: false; owner: SessionOwner; now: number };

/** A worker process, as `berth workers` lists it. */
export interface WorkerHost {
  /** Unique per process: host id and pid. */
  id: string;
  hostId: string;
  pid: number | null;
  tags: string[];
  concurrency: number;
  startedAt: number;
  heartbeatAt: number;
  stoppedAt: number | null;
  /** What the worker said of itself at its last heartbeat (slots in use, runs it left and why); null before. */
  report: WorkerReport | null;
  /** When an operator asked it to drain (`berth drain`); null if nobody did. */
  drainRequestedAt: number | null;
}

/** A worker's account of itself, written with its heartbeat. */
export interface WorkerReport {
  slotsInUse: number;
  /** Runs it could claim but leaves to other workers, and why (e.g. it cannot start their image). */
  left: Array<{ sessionId: string; runId: string | null; why: string }>;
}

/**
 * Run ownership for several hosts on one store (issue 15). Every time here is the database clock,
 * so hosts agree on when a lease ran out.
 */
export interface OwnershipRecords {
  /** Takes the session: refused while a live owner holds it, unless `takeOver` (operator). Bumps the epoch. */
  claimSession(sessionId: string, holder: { hostId: string; pid: number | null }, ttlMs: number, opts?: { takeOver?: boolean }): Promise<ClaimResult>;
  /** Extends the lease; false when the epoch moved on (another host took the session), it was released, or the lease already ran out (a lapsed claim is never revived). */
  renewSession(sessionId: string, epoch: number, ttlMs: number): Promise<boolean>;
  /** A clean give-up: the next claim needs no wait. False when the epoch had moved on. */
  releaseSession(sessionId: string, epoch: number): Promise<boolean>;
  getSessionOwner(sessionId: string): Promise<SessionOwner | undefined>;
  /**
   * Every session's owner; `liveHeldBy`: only claims of that host id that are neither released nor
   * lapsed on the database clock (what a host checks for owners of its own machine that died).
   */
  listSessionOwners(filter?: { liveHeldBy?: string }): Promise<SessionOwner[]>;
  /** Claims of sessions after their first (take-overs, drains, restarts), summed over every session: one aggregate read. */
  ownershipChanges(): Promise<number>;
  /**
   * Sessions with unfinished tasks and no live owner, oldest first; `orphaned`: only those whose
   * owner neither released them nor renews them (its lease ran out: a take-over, not a new run).
   */
  claimableSessions(limit: number, opts?: { orphaned?: boolean }): Promise<string[]>;
  /** The database clock's now. */
  databaseNow(): Promise<number>;
  heartbeatHost(h: { id: string; hostId: string; pid: number | null; tags: string[]; concurrency: number; report?: WorkerReport }): Promise<void>;
  stopHost(id: string): Promise<void>;
  /** Asks the live workers named by `id` (a worker id `host:pid`, or a host id: all its workers) to drain; the ids asked. */
  requestDrain(id: string): Promise<string[]>;
  listHosts(): Promise<WorkerHost[]>;
  /** One worker process's row (`host:pid`): what a worker reads of itself at each beat (the rows of stopped workers stay). */
  getHost(id: string): Promise<WorkerHost | undefined>;
}
