import type { Logger } from 'pino';
import type { SandboxHost, SweepRecord } from '../sandbox';
import type { Store } from '../store';

/** A session this worker owned when it began to drain, with the epoch it held it under. */
export interface DrainedSession {
  sessionId: string;
  epoch: number;
}

/** The snapshot policy of the run a lease serves (plan runs: from the root task's input), when known. */
async function snapshotPolicyOf(store: Store, runId: string): Promise<string | undefined> {
  const run = await store.getRun(runId);
  const root = run?.rootTaskId ? await store.getTask(run.rootTaskId) : undefined;
  const env = (root?.input as { environment?: { snapshot?: { policy?: unknown } } } | undefined)?.environment;
  return typeof env?.snapshot?.policy === 'string' ? env.snapshot.policy : undefined;
}

/**
 * A drained worker leaves no sandbox running behind it: the sandboxes of the sessions it held
 * (under the epoch it held them) are removed with their networks and rules, and the next owner
 * restores the run from its newest snapshot, which holds every committed step (a step cut off by
 * the drain is judged from its record alone, as after a crash). Kept: a sandbox of a run whose
 * snapshots are `on-demand` (its workspace may be ahead of the newest snapshot; the next owner on
 * this engine adopts it, and its watchdog stops it if none does), and one another owner adopted
 * in the meantime (its record's epoch moved on).
 */
export async function releaseDrainedSandboxes(d: { store: Store; sandbox: SandboxHost; logger: Logger }, drained: DrainedSession[]): Promise<SweepRecord[]> {
  if (drained.length === 0) return [];
  const epochs = new Map(drained.map((s) => [s.sessionId, s.epoch]));
  const policies = new Map<string, string | undefined>();
  return d.sandbox.releaseLeases(async (r) => {
    const epoch = epochs.get(r.sessionId);
    if (epoch === undefined || (r.epoch ?? epoch) !== epoch || r.hostId !== d.sandbox.hostId) return false;
    if (!r.runId) return false;
    if (!policies.has(r.runId)) policies.set(r.runId, await snapshotPolicyOf(d.store, r.runId));
    const policy = policies.get(r.runId);
    // Unknown (an agent session's sandbox): kept, like on-demand.
    return policy !== undefined && policy !== 'on-demand';
  }, 'released');
}
