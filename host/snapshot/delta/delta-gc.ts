import type { Logger } from 'pino';
import type { Store } from '../../store';
import type { Clock } from '../../support';
import type { DeltaImages } from './delta-images';

/** What `berth gc` did with snapshot layers still kept in the store. */
export interface DeltaGcResult {
  /** Loaded into the engine: a record (or a pending child) names the image. */
  loaded: string[];
  /** Deleted: no unpruned record and no pending child names the image (a host died before the record committed, or it was pruned). */
  dropped: string[];
}

/**
 * Settles the delta layers a crashed or stopped host left in the store, older than `graceMs`
 * (a younger one may belong to a snapshot whose record is about to commit): each one a snapshot
 * record still needs is loaded into the engine (parents first), the rest are deleted.
 */
export async function settleSnapshotDeltas(d: { store: Store; images: DeltaImages; clock: Clock; logger: Logger }, o: { graceMs: number }): Promise<DeltaGcResult> {
  const out: DeltaGcResult = { loaded: [], dropped: [] };
  const pending = await d.store.listSnapshotDeltas();
  if (pending.length === 0) return out;
  const named = new Set((await d.store.listSnapshots({ pruned: false })).map((s) => s.imageId));
  const now = d.clock.now();
  for (const delta of pending) {
    if (now - delta.createdAt < o.graceMs || !named.has(delta.imageId)) continue;
    await d.images.materialize(delta.imageId);
    out.loaded.push(delta.imageId);
  }
  // Loading a needed image loaded its pending parents too; what is left is needed by nothing.
  const left = new Set((await d.store.listSnapshotDeltas()).map((x) => x.imageId));
  const parents = new Set((await d.store.listSnapshotDeltas()).map((x) => x.parentImageId));
  for (const delta of pending) {
    if (!left.has(delta.imageId) || now - delta.createdAt < o.graceMs || named.has(delta.imageId) || parents.has(delta.imageId)) continue;
    await d.store.deleteSnapshotDelta(delta.imageId);
    out.dropped.push(delta.imageId);
    d.logger.info({ imageId: delta.imageId, snapshotId: delta.snapshotId }, 'snapshot layer no record needs removed from the store');
  }
  return out;
}
