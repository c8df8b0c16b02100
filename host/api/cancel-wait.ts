import { isFinalRunState, type Run } from '../model';
import type { HostParts } from './assemble';
import { getRunOrThrow, ownerAndClaim } from './decisions';
import type { OwnerClaim } from './owner-claim';
import type { HostView } from './run-driver';

/**
 * How a wait for a committed cancel ended: the run `ended` (its owner carried the cancel out, a
 * frozen one once it ran again), or its owner is `gone` (its claim expired without a renewal, or
 * it released the run): the waiter may carry the cancel out itself, fenced by a new epoch.
 */
export type CancelWaitEnd = { kind: 'ended'; run: Run; waitedMs: number } | { kind: 'gone'; run: Run; owner: HostView | null; waitedMs: number };

/**
 * Waits until the run ended or no live host owns it any more, polling the store (every quarter of
 * the owner's renewal interval, at most a second, and right after the claim's expiry).
 * `onClaim` hears each change of the claim's state (an overdue owner renewing again, or the
 * reverse), so a waiting operator is told what the owner does meanwhile.
 */
export async function waitForCancelTurn(p: HostParts, runId: string, o: { onClaim?: (claim: OwnerClaim, owner: HostView) => void; signal?: AbortSignal } = {}): Promise<CancelWaitEnd> {
  const started = Date.now();
  let said: OwnerClaim['state'] | undefined;
  for (;;) {
    o.signal?.throwIfAborted();
    const run = await getRunOrThrow(p.store, runId);
    const waitedMs = Date.now() - started;
    if (isFinalRunState(run.state)) return { kind: 'ended', run, waitedMs };
    const { owner, claim } = await ownerAndClaim(p, run);
    if (!owner?.live || !claim) return { kind: 'gone', run, owner, waitedMs };
    if (claim.state !== said) {
      if (said !== undefined) o.onClaim?.(claim, owner);
      said = claim.state;
    }
    const every = Math.min(1000, Math.max(50, claim.renewEveryMs / 4));
    // Just past the expiry on the database clock (read again then), not a whole interval later.
    await new Promise((r) => setTimeout(r, Math.min(every, claim.expiresInMs + 25)));
  }
}
