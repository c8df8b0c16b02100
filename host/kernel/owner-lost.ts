import { OPEN_RUN_STATES, OWNER_LOST, type Json } from '../model';
import type { NewEntry, SessionOwner, Store } from '../store';
import { newId } from '../support';

/**
 * The entries a new owner writes on the unfinished runs of a session it claimed from an owner that
 * never released it (killed, or its lease ran out): the record then accounts for that host's end,
 * even when it died before its first commit (its claim is all it left). Nothing for a first claim
 * or a clean release.
 */
export async function ownerLostEntries(store: Store, sessionId: string, previous: SessionOwner | null, claimed: { epoch: number; hostId: string; at: number }): Promise<NewEntry[]> {
  if (!previous || previous.stoppedAt !== null) return [];
  const runs = await store.listRuns({ sessionId, states: OPEN_RUN_STATES });
  const body: Json = {
    epoch: previous.epoch,
    holder: previous.holder,
    pid: previous.pid,
    takenAt: previous.takenAt,
    lastHeartbeatAt: previous.heartbeatAt,
    leaseUntil: previous.leaseUntil,
    why: previous.leaseUntil < claimed.at ? 'lease_expired' : 'process_gone_or_taken_over',
    claimedBy: claimed.hostId,
    newEpoch: claimed.epoch,
  };
  return runs.map((r) => ({ id: newId('ent'), runId: r.id, kind: OWNER_LOST, body }));
}
