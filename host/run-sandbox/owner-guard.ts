import type { Logger } from 'pino';
import { BerthError } from '../errors';
import type { SandboxHost } from '../sandbox';
import type { Store } from '../store';

/**
 * Removes the run's sandboxes that earlier owners held (their epoch is older than the current
 * owner's) except `keep`, the pointer's: a host killed mid-restore leaves one that nobody would
 * ever attach again, still running the step it started there (DESIGN.md "no command outlives its
 * owner").
 */
export async function supersedeEarlier(d: { store: Store; sandbox: SandboxHost; logger: Logger }, runId: string, sessionId: string, keep: string | null): Promise<Array<{ leaseId: string; containerId: string; epoch: number | null }>> {
  const owner = await d.store.getSessionOwner(sessionId);
  if (!owner || owner.stoppedAt !== null) return [];
  const stale = (await d.store.listLeases({ runId, unreleased: true })).filter((r) => r.id !== keep && (r.epoch ?? -1) < owner.epoch);
  if (stale.length === 0) return [];
  const ids = new Set(stale.map((r) => r.id));
  const removed = await d.sandbox.releaseLeases((r) => ids.has(r.id), 'stale_epoch');
  d.logger.warn({ runId, leases: [...ids], containers: removed.map((r) => r.containerId) }, 'removed sandboxes of the run that an earlier owner left');
  // Every stale lease is closed now (its container removed, or gone already): each is a sweep of the run.
  return stale.map((r) => ({ leaseId: r.id, containerId: removed.find((x) => x.leaseId === r.id)?.containerId ?? r.containerId, epoch: r.epoch ?? null }));
}

/**
 * Refuses to act for a run whose session this host no longer owns under `mine`, the epoch it holds
 * the run's sandbox with: a host frozen past its lease and woken never touches (snapshots, pauses)
 * the sandbox the new owner uses. Undefined: not held under an owner, nothing to check.
 */
export async function assertStillOwner(store: Store, runId: string, sessionId: string, mine: number | undefined): Promise<void> {
  if (mine === undefined) return;
  const owner = await store.getSessionOwner(sessionId);
  const now = await store.databaseNow();
  if (owner && owner.epoch === mine && owner.stoppedAt === null && owner.leaseUntil >= now) return;
  throw new BerthError('execution_right_lost', `run ${runId} is no longer this host's (epoch ${mine}, the session is at ${owner?.epoch ?? '?'}): its sandbox is left to the current owner`, { ids: { runId, sessionId } });
}
