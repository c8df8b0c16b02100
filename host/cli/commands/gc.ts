import { assertKeepAllowed, DeltaImages, deleteManifest, deletePrunedManifests, pruneSnapshots, removeOrphanSnapshots, settleSnapshotDeltas, type ManifestGcDeps } from '../../snapshot';
import { registryAuth, snapshotEngine } from '../../sandbox';
import { releaseEndedRunLeases } from '../../runtime/run-end-leases';
import { forkPointsInUse, removeFinishedForks } from '../../fork';
import type { CliContext } from '../context';
import { emit, table } from '../output';

/** Unrecorded snapshot images younger than this are left alone by default: their record may be about to commit. */
export const DEFAULT_GC_GRACE_S = 600;

/** Deletion of pruned snapshots' manifests from their registries, with each registry's credentials from the Docker client configuration. */
export function manifestGcDeps(ctx: CliContext): ManifestGcDeps {
  return {
    store: ctx.store,
    clock: ctx.clock,
    logger: ctx.logger,
    deleteManifest: (ref, signal) => deleteManifest(ref, { auth: registryAuth(ref.split('/')[0]!), signal }),
  };
}

/**
 * `berth gc [--keep N] [--grace S]`: removes this store's containers whose lease is released,
 * expired or unknown, and at once (no TTL wait) every sandbox of a run that reached a final state
 * (reason `run_ended`; an agent session's own sandbox stays with the session); removes snapshot images of this store that no record names (older than S
 * seconds, default 600, of finished runs); and prunes snapshots beyond the newest N per session
 * (default 5) of finished runs, never one an unfinished fork starts from. Snapshot layers a stopped
 * host left in the store (older than S) are loaded into the engine when a record names them, else deleted. `--forks-older-than` also
 * removes the snapshots of forks that finished longer ago than that. The manifests of pruned snapshots that were pushed
 * are deleted from their registry (unless an unpruned snapshot shares them); a registry that does not
 * answer leaves them pending for the next gc, reported, never failing it. `--keep 0` is refused while an unfinished run's session holds
 * snapshots: they are its only restore points. An imported run's snapshots and images are the exporting store's: never
 * pruned, untagged or removed here. An image a snapshot layer still kept in the store is built on is pruned only after
 * that layer is loaded into the engine (inside the grace too).
 */
export async function gc(ctx: CliContext, keep = 5, graceS = DEFAULT_GC_GRACE_S, forksOlderThanMs?: number): Promise<number> {
  await assertKeepAllowed(ctx.store, keep);
  const ended = await releaseEndedRunLeases(ctx);
  const removed = [...ended, ...(await ctx.sandbox.sweep())];
  const engine = snapshotEngine(ctx.docker);
  const orphans = await removeOrphanSnapshots(
    { store: ctx.store, storeId: await ctx.sandbox.storeId(), clock: ctx.clock, logger: ctx.logger, listSnapshotImages: engine.listSnapshotImages, removeSnapshot: engine.removeSnapshot, imageLayerBytes: engine.imageLayerBytes },
    { graceMs: graceS * 1000 },
  );
  const reclaimedBytes = orphans.reduce((n, o) => n + o.bytes, 0);
  const images = new DeltaImages({ engine, store: ctx.store, logger: ctx.logger });
  const deltas = await settleSnapshotDeltas({ store: ctx.store, images, clock: ctx.clock, logger: ctx.logger }, { graceMs: graceS * 1000 });
  // Layers inside the grace are left above, but an image one is built on is pruned only after it is loaded.
  const prune = { store: ctx.store, removeSnapshot: engine.removeSnapshot, clock: ctx.clock, logger: ctx.logger, inUse: () => forkPointsInUse(ctx.store), materialize: (id: string) => images.materialize(id) };
  const forks = forksOlderThanMs === undefined ? null : await removeFinishedForks(prune, forksOlderThanMs);
  const pruned = await pruneSnapshots(prune, { keepLast: keep });
  const registryManifests = await deletePrunedManifests(manifestGcDeps(ctx));
  emit(ctx.json, { hostId: ctx.hostId, removed, unrecordedImages: orphans, reclaimedBytes, pruned: pruned.map((s) => s.id), snapshotDeltas: deltas, registryManifests, ...(forks ? { forks } : {}) }, () =>
    [
      ...(forks ? [forks.length === 0 ? 'no finished forks that old' : `finished forks: ${forks.length}, their ${forks.reduce((n, f) => n + f.snapshots.length, 0)} snapshot(s) removed (${forks.map((f) => f.runId).join(' ')})`] : []),
      removed.length === 0
        ? `no leftover containers in this store (host ${ctx.hostId})`
        : `removed ${removed.length} container(s):\n${table([['CONTAINER', 'LEASE', 'REASON'], ...removed.map((r) => [r.containerId.slice(0, 12), r.leaseId ?? '-', r.reason])])}`,
      orphans.length === 0
        ? 'no unrecorded snapshot images'
        : `removed ${orphans.length} unrecorded snapshot image tag(s), ${(reclaimedBytes / 1e6).toFixed(1)} MB reclaimed: ${orphans.map((o) => o.snapshotId).join(' ')}`,
      ...(deltas.loaded.length + deltas.dropped.length === 0 ? [] : [`snapshot layers kept in the store: ${deltas.loaded.length} loaded into the engine, ${deltas.dropped.length} no record needs removed`]),
      pruned.length === 0 ? 'no snapshots to prune' : `pruned ${pruned.length} snapshot(s): ${pruned.map((s) => s.id).join(' ')}`,
      ...(registryManifests.deleted.length ? [`deleted ${registryManifests.deleted.length} pruned snapshot manifest(s) from the registry`] : []),
      ...(registryManifests.pending.length
        ? [`${registryManifests.pending.length} pruned snapshot manifest(s) not deleted from the registry (the next gc tries again):\n${registryManifests.pending.map((p) => `  ${p.registryRef}: ${p.error}`).join('\n')}`]
        : []),
    ].join('\n'),
  );
  return 0;
}
