import { gc as collect } from '../../api/gc';
import type { CliContext } from '../context';
import { emit, table } from '../output';

export { DEFAULT_GC_GRACE_S } from '../../api/gc';
export { manifestGcDeps } from '../../api/run-end';

/** `berth gc [--keep N] [--grace S] [--forks-older-than D]`: see the API's `gc` for what goes; this prints it. */
export async function gc(ctx: CliContext, keep?: number, graceS?: number, forksOlderThanMs?: number): Promise<number> {
  const r = await collect(ctx, { keep, graceS, forksOlderThanMs });
  const { removed, unrecordedImages: orphans, reclaimedBytes, pruned, snapshotDeltas: deltas, registryManifests, forks } = r;
  emit(ctx.json, { hostId: ctx.hostId, removed, unrecordedImages: orphans, reclaimedBytes, pruned: pruned.map((s) => s.id), snapshotDeltas: deltas, registryManifests, ...(forks ? { forks } : {}) }, () =>
    [
      ...(forks ? [forks.length === 0 ? 'no finished forks that old' : `finished forks: ${forks.length}, their ${forks.reduce((n, f) => n + f.snapshots.length, 0)} snapshot(s) removed (${forks.map((f) => f.runId).join(' ')})`] : []),
      removed.length === 0
        ? `no leftover containers in this store (host ${ctx.hostId})`
        : `removed ${removed.length} container(s):\n${table([['CONTAINER', 'LEASE', 'REASON'], ...removed.map((x) => [x.containerId.slice(0, 12), x.leaseId ?? '-', x.reason])])}`,
      orphans.length === 0
        ? 'no unrecorded snapshot images'
        : `removed ${orphans.length} unrecorded snapshot image tag(s), ${(reclaimedBytes / 1e6).toFixed(1)} MB reclaimed: ${orphans.map((o) => o.snapshotId).join(' ')}`,
      ...(deltas.loaded.length + deltas.dropped.length === 0 ? [] : [`snapshot layers kept in the store: ${deltas.loaded.length} loaded into the engine, ${deltas.dropped.length} no record needs removed`]),
      pruned.length === 0 ? 'no snapshots to prune' : `pruned ${pruned.length} snapshot(s): ${pruned.map((s) => s.id).join(' ')}`,
      ...(registryManifests.deleted.length ? [`deleted ${registryManifests.deleted.length} pruned snapshot manifest(s) from the registry`] : []),
      ...(registryManifests.pending.length
        ? [`${registryManifests.pending.length} pruned snapshot manifest(s) not deleted from the registry (the next gc tries again):\n${registryManifests.pending.map((x) => `  ${x.registryRef}: ${x.error}`).join('\n')}`]
        : []),
    ].join('\n'),
  );
  return 0;
}
