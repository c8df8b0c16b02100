import { createHash } from 'node:crypto';
import { BerthError } from '../errors';
import type { AcceptanceDecision } from '../model';
import type { Store } from '../store';
import { decideAcceptance, type DecideAcceptance } from './acceptance';

/** `already_decided`: the decision asked for is the run's acceptance already, as `d` recorded it. */
function alreadyDecided(d: AcceptanceDecision): BerthError {
  return new BerthError('already_decided', `run ${d.runId} is already ${d.decision} by ${d.actor} at ${new Date(d.at).toISOString()}${d.reason ? ` (${d.reason})` : ''}; this request recorded nothing`, {
    ids: { runId: d.runId },
  });
}

/**
 * A decision asked without a request id of its own (a click in `berth serve`, a POST to its API):
 * one intent is one decision. A browser sends a double click on Accept as two POSTs, and a second
 * tab or a retrying client sends the same decision again, each of which recorded a decision of
 * its own. A request asking for what the newest decision already is (same decision, actor and
 * reason) is refused with `already_decided`. Two requests in flight at once both read the same
 * newest decision, so that check alone lets both through; their request id is therefore derived
 * from that newest decision and what they ask, and the store keeps one row per request id: the
 * second commit records nothing and is answered as the repeat it is.
 */
export async function decideAcceptanceOnce(store: Store, o: Omit<DecideAcceptance, 'requestId'>): Promise<AcceptanceDecision> {
  const newest = (await store.listAcceptance({ runId: o.runId })).at(-1);
  if (newest && newest.decision === o.decision && newest.actor === o.actor && (newest.reason ?? null) === o.reason) throw alreadyDecided(newest);
  const key = JSON.stringify([o.runId, newest?.id ?? null, o.decision, o.actor, o.reason]);
  const requestId = `once_${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
  const { decision, repeated } = await decideAcceptance(store, { ...o, requestId });
  if (repeated) throw alreadyDecided(decision);
  return decision;
}
