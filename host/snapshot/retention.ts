import type { Logger } from 'pino';
import { isFinalRunState, type Snapshot } from '../model';
import type { Store } from '../store';
import type { Clock } from '../support';
import { faultAside } from '../support/faults';
import { importedSessions, PendingDeltaParents } from './kept-images';

export interface PruneDeps {
  store: Store;
  removeSnapshot(tag: string): Promise<'removed' | 'untagged' | 'absent'>;
  clock: Clock;
  logger: Logger;
  /** Snapshot ids another record still needs (a fork not yet finished starts from its parent's); never pruned. */
  inUse?: () => Promise<Set<string>>;
  /**
   * Loads an image kept in the store as a layer into the engine (`DeltaImages.materialize`), so
   * that the image it is built on may go; without it, such parent images are kept.
   */
  materialize?: (imageId: string) => Promise<boolean>;
}

/**
 * Keeps the newest `keepLast` snapshots of each session and removes the rest, except that a
 * snapshot of a run that has not finished is never pruned: reconciliation may restore any of them.
 * Records stay (marked pruned) so that history still says what existed; each is marked before its
 * image goes. Snapshots of imported runs
 * are another store's (their images too) and are never touched; an image a pending delta layer is
 * built on goes only once that layer is loaded ({@link PendingDeltaParents}).
 */
export async function pruneSnapshots(d: PruneDeps, opts: { keepLast: number; sessionId?: string }): Promise<Snapshot[]> {
  const needed = (await d.inUse?.()) ?? new Set<string>();
  const imported = await importedSessions(d.store);
  const deltas = await PendingDeltaParents.read(d);
  // Only what can still be pruned: a 3,000-step run's end read its 3,000 records to find the few its
  // in-run retention left.
  const all = (await d.store.listSnapshots({ ...(opts.sessionId ? { sessionId: opts.sessionId } : {}), pruned: false })).filter((s) => !imported.has(s.sessionId));
  const finished = new Map<string, boolean>();
  const isFinished = async (runId: string | null) => {
    if (runId === null) return true;
    if (!finished.has(runId)) {
      const run = await d.store.getRun(runId);
      finished.set(runId, run ? isFinalRunState(run.state) : true);
    }
    return finished.get(runId)!;
  };
  const bySession = new Map<string, Snapshot[]>();
  for (const s of all) {
    const list = bySession.get(s.sessionId);
    if (list) list.push(s);
    else bySession.set(s.sessionId, [s]);
  }
  const pruned: Snapshot[] = [];
  for (const list of bySession.values()) {
    const newestFirst = [...list].sort((a, b) => b.commitSeq - a.commitSeq || b.createdAt - a.createdAt);
    for (const s of newestFirst.slice(Math.max(0, opts.keepLast))) {
      if (!(await isFinished(s.runId)) || needed.has(s.id)) continue;
      if (!(await deltas.release(s.imageId, { snapshotId: s.id }))) continue;
      // The record first: a host killed between the two leaves a pruned record's tag (gc removes it),
      // never a live record without its image, which a fork or a restore would trust.
      await d.store.markSnapshotPruned(s.id, d.clock.now());
      pruned.push(s);
      faultAside('retention:marked');
      const outcome = await d.removeSnapshot(s.id).catch((err: unknown) => {
        d.logger.warn({ snapshotId: s.id, imageId: s.imageId, err }, 'snapshot pruned; its image could not be removed (berth gc removes it)');
        return 'failed' as const;
      });
      d.logger.info({ snapshotId: s.id, imageId: s.imageId, outcome }, 'snapshot pruned');
    }
  }
  return pruned;
}
