import { forkPointsInUse } from '../fork';
import { isFinalRunState, type Run } from '../model';
import type { PlanRunInput } from '../plan';
import type { HostRuntime } from '../runtime/host-runtime';
import { releaseEndedRunLeases } from '../runtime/run-end-leases';
import { registryAuth, snapshotEngine } from '../sandbox';
import { deleteManifest, deletePrunedManifests, pruneSnapshots, type ManifestGcDeps } from '../snapshot';
import type { HostParts } from './assemble';
import { faultPoint } from '../support/faults';

/** Deletion of pruned snapshots' manifests from their registries, with each registry's credentials from the Docker client configuration. */
export function manifestGcDeps(p: HostParts): ManifestGcDeps {
  return {
    store: p.store,
    clock: p.clock,
    logger: p.logger,
    deleteManifest: (ref, signal) => deleteManifest(ref, { auth: registryAuth(ref.split('/')[0]!), signal }),
  };
}

/**
 * Stops a runtime's kernel and waits for what it started in the background: the releases of ended
 * runs' sandboxes and the loads of snapshot layers into the engine. Only then may the store close
 * (a load finishing after it would write to a closed connection and leave its delta row behind).
 */
export async function stopRuntime(p: HostParts, rt: HostRuntime): Promise<void> {
  await rt.kernel.stop();
  await rt.leasesReleased();
  await rt.retentionSettled();
  await rt.snapshots.images.settle().catch((err: unknown) => p.logger.warn({ err }, 'a snapshot layer load did not finish; berth gc loads it later'));
}

/**
 * Run-end policy, the same whoever drove the run (`berth run`, `resume`, a worker, a program):
 * for a run in a final state, every sandbox leased for it goes (also one a killed earlier host
 * leased and never recorded), what could not be removed is swept, and retention keeps the
 * environment's `snapshot.keepLast` snapshots of its session, deleting pruned pushed copies from
 * their registry. Nothing here fails the caller: what is left is logged for `berth gc`.
 */
export async function endRun(p: HostParts, run: Run): Promise<void> {
  if (!isFinalRunState(run.state)) return;
  await releaseEndedRunLeases(p, [run.id]).catch((err: unknown) => p.logger.warn({ err, runId: run.id }, 'could not release the sandboxes of an ended run; berth gc will'));
  // A sandbox whose record was closed while its container could not be removed (the engine was
  // restarting, the container stopped) is the sweeper's: at the end, not only at the next start.
  await p.sandbox.sweep().catch((err: unknown) => p.logger.warn({ err, runId: run.id }, 'end-of-run sweep failed; berth gc removes what is left'));
  faultPoint('run-end:prune');
  await retain(p, run).catch((err: unknown) => p.logger.warn({ err, runId: run.id }, 'retention at run end failed; berth gc prunes later'));
  await removePrunedTags(p, run).catch((err: unknown) => p.logger.warn({ err, runId: run.id }, 'could not remove the images of pruned snapshots; berth gc will'));
}

/**
 * Retention marks a record pruned, then removes its tag: a host killed between the two (or an
 * engine that refused the removal) left the tag of a pruned record, which only `berth gc` removed,
 * so a run resumed after a kill ended with images nothing names again. The run's end removes them
 * (its snapshot images, by label: one engine call, made only when the run has a pruned snapshot).
 */
async function removePrunedTags(p: HostParts, run: Run): Promise<void> {
  if ((await p.store.listSnapshots({ runId: run.id, pruned: true, newest: 1 })).length === 0) return;
  const engine = snapshotEngine(p.docker);
  for (const img of await engine.listSnapshotImages({ runId: run.id })) {
    for (const tag of img.tags) {
      const snap = await p.store.getSnapshot(tag);
      if (snap?.prunedAt == null || snap.runId !== run.id) continue;
      const outcome = await engine.removeSnapshot(tag);
      p.logger.info({ runId: run.id, snapshotId: tag, imageId: img.imageId, outcome }, 'image of a pruned snapshot removed at run end');
    }
  }
}

/** Retention at the end of a run: the environment's `snapshot.keepLast` per session. */
async function retain(p: HostParts, run: Run): Promise<void> {
  const root = run.rootTaskId ? await p.store.getTask(run.rootTaskId) : undefined;
  const keepLast = (root?.input as unknown as PlanRunInput | undefined)?.environment?.snapshot?.keepLast;
  if (keepLast === undefined) return;
  const engine = snapshotEngine(p.docker);
  await pruneSnapshots({ store: p.store, removeSnapshot: engine.removeSnapshot, clock: p.clock, logger: p.logger, inUse: () => forkPointsInUse(p.store) }, { keepLast, sessionId: run.sessionId });
  // The pushed copies go too; a registry that does not answer is logged and left to `berth gc`.
  await deletePrunedManifests(manifestGcDeps(p), { sessionId: run.sessionId });
}
