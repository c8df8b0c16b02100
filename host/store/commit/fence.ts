import { BerthError } from '../../errors';
import type { CommitInput, FenceRefusal } from '../commit-input';
import { sessionScope } from '../ownership';

/** The fencing row of a session as the commit reads it, with the database clock's now. */
export interface FenceRow {
  db_now: number;
  epoch: number | null;
  stopped_at: number | null;
  lease_until: number | null;
}

/**
 * A commit is fenced only by its own session's claim: a store-wide scope (or another session's)
 * could be held live while this session's owner is someone else, which is the hole of two
 * ownership models fencing each other out of nothing. Such a fence is a caller's bug.
 */
export function assertOwnScope(c: CommitInput): void {
  if (!c.fence) return;
  const own = sessionScope(c.sessionId);
  if (c.fence.scope !== own) {
    throw new BerthError('bad_commit', `a commit of session ${c.sessionId} is fenced by scope ${c.fence.scope}; only its own scope ${own} may fence it`, { ids: { sessionId: c.sessionId } });
  }
}

/**
 * Why the claim `fence` names does not hold now, or null when it does: the row has that epoch,
 * was not released and its lease runs at least until the database clock's now (a lease holds
 * until and including `lease_until`, as claimSession judges it). A lapsed lease is refused even
 * when nobody claimed the session yet: its owner may already be judged dead by the others.
 */
export function fenceRefusal(fence: { epoch: number }, row: FenceRow | undefined): { reason: FenceRefusal; actual: number | null } | null {
  // Epoch 0 is the placeholder a first PostgreSQL claim inserts before it locks the row: never granted.
  if (!row || row.epoch === null || row.epoch === 0) return { reason: 'missing', actual: null };
  if (row.epoch !== fence.epoch) return { reason: 'taken', actual: row.epoch };
  if (row.stopped_at !== null) return { reason: 'released', actual: row.epoch };
  if (row.lease_until === null || row.lease_until < row.db_now) return { reason: 'expired', actual: row.epoch };
  return null;
}
