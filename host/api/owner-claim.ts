import type { Store } from '../store';

/**
 * The claim a run's owner holds on its session, read on the database clock: whether the owner
 * still renews it. A live process is not a working one: a host frozen by SIGSTOP, in a paused VM,
 * or too loaded to run its timers keeps its pid, so `processAlive` calls it live, but it renews
 * nothing and carries nothing out until it runs again. Its claim tells the two apart.
 */
export interface OwnerClaim {
  /** `renewing`: the owner renewed within half its claim's TTL; `overdue`: it has not (it still holds the claim until `leaseUntil`). */
  state: 'renewing' | 'overdue';
  epoch: number;
  /** Database-clock times (ms): the last renewal, the claim's expiry and now. */
  heartbeatAt: number;
  leaseUntil: number;
  now: number;
  heartbeatAgeMs: number;
  /** Until the claim expires; 0 once it has. */
  expiresInMs: number;
  /** The TTL the owner claims with (every renewal sets the expiry this far past its time). */
  ttlMs: number;
  /** How often the owner renews: a third of the TTL (host/kernel/kernel.ts). */
  renewEveryMs: number;
}

/**
 * Half the TTL without a renewal is overdue: the owner renews every third of it, so by then it
 * missed a renewal by half an interval (a busy event loop delays one by far less), and the claim
 * still has half its TTL to go: the earliest moment "it has stopped renewing" is true and useful.
 */
const OVERDUE_FRACTION = 0.5;

/** The claim of a session's owner, or null when nobody holds one (never claimed, or released). */
export async function readOwnerClaim(store: Store, sessionId: string): Promise<OwnerClaim | null> {
  const owner = await store.getSessionOwner(sessionId);
  if (!owner || owner.stoppedAt !== null) return null;
  const now = await store.databaseNow();
  const ttlMs = Math.max(1, owner.leaseUntil - owner.heartbeatAt);
  const heartbeatAgeMs = Math.max(0, now - owner.heartbeatAt);
  return {
    state: heartbeatAgeMs > ttlMs * OVERDUE_FRACTION ? 'overdue' : 'renewing',
    epoch: owner.epoch,
    heartbeatAt: owner.heartbeatAt,
    leaseUntil: owner.leaseUntil,
    now,
    heartbeatAgeMs,
    expiresInMs: Math.max(0, owner.leaseUntil - now),
    ttlMs,
    renewEveryMs: Math.max(50, Math.floor(ttlMs / 3)),
  };
}
