import type { Logger } from 'pino';
import { isFinalRunState } from '../model';
import type { Store } from '../store';
import type { Clock } from '../support';
import { PendingDeltaParents } from '../snapshot/kept-images';
import { forkedFrom, forkPointsInUse } from './lineage';

export interface ForkGcDeps {
  store: Store;
  removeSnapshot(tag: string): Promise<'removed' | 'untagged' | 'absent'>;
  clock: Clock;
  logger: Logger;
  /** Loads a pending delta layer built on an image about to go (see `PruneDeps.materialize`); without it that image is kept. */
  materialize?: (imageId: string) => Promise<boolean>;
}

/**
 * `berth gc --forks-older-than`: the snapshots of forks that finished more than `olderThanMs` ago.
 * Their records stay (marked pruned), so the lineage and history still say what existed; a snapshot
 * an unfinished fork of the fork starts from is kept. (Their sandboxes went when they finished.)
 * An imported fork's snapshots are the exporting store's: left alone.
 */
export async function removeFinishedForks(d: ForkGcDeps, olderThanMs: number): Promise<Array<{ runId: string; snapshots: string[] }>> {
  const needed = await forkPointsInUse(d.store);
  const deltas = await PendingDeltaParents.read(d);
  const now = d.clock.now();
  const out: Array<{ runId: string; snapshots: string[] }> = [];
  for (const run of await d.store.listRuns()) {
    if (!isFinalRunState(run.state) || now - run.updatedAt < olderThanMs || !(await forkedFrom(d.store, run)) || (await d.store.getImportedRun(run.id))) continue;
    const removed: string[] = [];
    for (const s of await d.store.listSnapshots({ runId: run.id })) {
      if (s.prunedAt !== null || needed.has(s.id) || !(await deltas.release(s.imageId, { runId: run.id, snapshotId: s.id }))) continue;
      const outcome = await d.removeSnapshot(s.id);
      await d.store.markSnapshotPruned(s.id, now);
      d.logger.info({ runId: run.id, snapshotId: s.id, outcome }, 'finished fork snapshot removed');
      removed.push(s.id);
    }
    out.push({ runId: run.id, snapshots: removed });
  }
  return out;
}
