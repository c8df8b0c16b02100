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

/** What `berth gc --forks-older-than` did to one finished fork: the snapshots it removed now, and those it had to keep. */
export interface CollectedFork {
  runId: string;
  snapshots: string[];
  /** Snapshots left in place: an unfinished fork of this one starts from them, or a pending layer is built on them. */
  kept?: string[];
}

/**
 * `berth gc --forks-older-than`: the snapshots of forks that finished more than `olderThanMs` ago.
 * Their records stay (marked pruned), so the lineage and history still say what existed; a snapshot
 * an unfinished fork of the fork starts from is kept. (Their sandboxes went when they finished.)
 * An imported fork's snapshots are the exporting store's: left alone. A fork with no unpruned
 * snapshot left was collected by an earlier gc: it is counted (`collectedBefore`), not listed, so
 * a gc run again finds nothing to do.
 */
export async function removeFinishedForks(d: ForkGcDeps, olderThanMs: number): Promise<{ forks: CollectedFork[]; collectedBefore: number }> {
  const needed = await forkPointsInUse(d.store);
  const deltas = await PendingDeltaParents.read(d);
  const now = d.clock.now();
  const out: CollectedFork[] = [];
  let collectedBefore = 0;
  for (const run of await d.store.listRuns()) {
    if (!isFinalRunState(run.state) || now - run.updatedAt < olderThanMs || !(await forkedFrom(d.store, run)) || (await d.store.getImportedRun(run.id))) continue;
    const left = await d.store.listSnapshots({ runId: run.id, pruned: false });
    if (left.length === 0) {
      collectedBefore++;
      continue;
    }
    const removed: string[] = [];
    const kept: string[] = [];
    for (const s of left) {
      if (needed.has(s.id) || !(await deltas.release(s.imageId, { runId: run.id, snapshotId: s.id }))) {
        kept.push(s.id);
        continue;
      }
      const outcome = await d.removeSnapshot(s.id);
      await d.store.markSnapshotPruned(s.id, now);
      d.logger.info({ runId: run.id, snapshotId: s.id, outcome }, 'finished fork snapshot removed');
      removed.push(s.id);
    }
    out.push({ runId: run.id, snapshots: removed, ...(kept.length ? { kept } : {}) });
  }
  return { forks: out, collectedBefore };
}
