import { forkPointsInUse, removeFinishedForks } from '../fork';
import { releaseEndedRunLeases } from '../runtime/run-end-leases';
import { snapshotEngine, type EgressSweep } from '../sandbox';
import { assertKeepAllowed, DeltaImages, type KeptOrphan, deletePrunedManifests, pruneSnapshots, removeOrphanSnapshots, settleSnapshotDeltas } from '../snapshot';
import { settleEndedRuns } from './ended-runs';
import type { RuntimeParts } from './runtime';
import { manifestGcDeps } from './run-end';

/** Unrecorded snapshot images younger than this are left alone by default: their record may be about to commit. */
export const DEFAULT_GC_GRACE_S = 600;

export interface GcOptions {
  /** Snapshots kept per session (default 5). */
  keep?: number;
  /** Seconds an unrecorded snapshot image or a stray layer is left alone (default 600). */
  graceS?: number;
  /** Also remove the snapshots of forks that finished longer ago than this. */
  forksOlderThanMs?: number;
}

/**
 * Settles the tasks a killed host left live in an ended run ({@link settleEndedRuns}); removes
 * this store's containers whose lease is released, expired or unknown, and at once every
 * sandbox of a run that reached a final state (an agent session's own sandbox stays with the
 * session); removes snapshot images of this store no record names (older than the grace, of
 * finished runs); loads or deletes snapshot layers a stopped host left in the store; prunes
 * snapshots beyond the newest `keep` per session of finished runs, never one an unfinished fork
 * starts from; deletes pruned pushed manifests from their registry (one that does not answer
 * leaves them pending for the next gc). `keep: 0` is refused while an unfinished run's session
 * holds snapshots. An imported run's snapshots and images are never touched.
 */
export async function gc(p: RuntimeParts, o: GcOptions = {}) {
  const keep = o.keep ?? 5;
  const graceMs = (o.graceS ?? DEFAULT_GC_GRACE_S) * 1000;
  await assertKeepAllowed(p.store, keep);
  // Before the sandboxes of ended runs go: a run ended with a task still live (a host killed right
  // after `reconcile --fail` committed) has its tasks settled first, as its owner would have.
  const endedRuns = await settleEndedRuns(p);
  const ended = await releaseEndedRunLeases(p);
  const sweeps: EgressSweep[] = [];
  const removed = [...ended, ...(await p.sandbox.sweep({ egress: sweeps }))];
  const egress = {
    networks: sweeps.flatMap((x) => x.removedNetworks),
    rules: sweeps.flatMap((x) => x.removedRules),
    keptNetworks: sweeps.flatMap((x) => x.keptNetworks),
  };
  const engine = snapshotEngine(p.docker);
  const keptImages: KeptOrphan[] = [];
  const orphans = await removeOrphanSnapshots(
    { store: p.store, storeId: await p.sandbox.storeId(), clock: p.clock, logger: p.logger, listSnapshotImages: engine.listSnapshotImages, removeSnapshot: engine.removeSnapshot, imageLayerBytes: engine.imageLayerBytes, listStoreTags: engine.listStoreTags },
    { graceMs, kept: keptImages },
  );
  const reclaimedBytes = orphans.reduce((n, x) => n + x.bytes, 0);
  const images = new DeltaImages({ engine, store: p.store, logger: p.logger });
  const deltas = await settleSnapshotDeltas({ store: p.store, images, clock: p.clock, logger: p.logger }, { graceMs });
  // Layers inside the grace are left above, but an image one is built on is pruned only after it is loaded.
  const prune = { store: p.store, removeSnapshot: engine.removeSnapshot, clock: p.clock, logger: p.logger, inUse: () => forkPointsInUse(p.store), materialize: (id: string) => images.materialize(id) };
  const collected = o.forksOlderThanMs === undefined ? null : await removeFinishedForks(prune, o.forksOlderThanMs);
  const pruned = await pruneSnapshots(prune, { keepLast: keep });
  const registryManifests = await deletePrunedManifests(manifestGcDeps(p));
  return { hostId: p.hostId, graceS: graceMs / 1000, endedRuns, removed, egress, unrecordedImages: orphans, keptImages, reclaimedBytes, pruned, snapshotDeltas: deltas, registryManifests, forks: collected?.forks ?? null, forksCollectedBefore: collected?.collectedBefore ?? null };
}

export type GcReport = Awaited<ReturnType<typeof gc>>;
