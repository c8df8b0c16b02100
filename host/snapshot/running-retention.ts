import type { Logger } from 'pino';
import type { Snapshot } from '../model';
import type { Store } from '../store';
import type { Clock } from '../support';
import { faultAside, faultMark } from '../support/faults';
import { importedSessions, PendingDeltaParents } from './kept-images';

export interface RunningPruneDeps {
  store: Pick<Store, 'listSnapshots' | 'markSnapshotPruned' | 'listSnapshotDeltas' | 'listImportedRuns'>;
  removeSnapshot(tag: string): Promise<'removed' | 'untagged' | 'absent'>;
  clock: Clock;
  logger: Logger;
  /** Loads pending delta layers built on an image about to go (`DeltaImages.materialize`); without it such images are kept. */
  materialize?: (imageId: string) => Promise<boolean>;
}

export interface RunningPrune {
  runId: string;
  sessionId: string;
  /** The environment's `snapshot.keepLast`: the run's newest this many stay. */
  keepLast: number;
  /** How many snapshots older than the kept ones one pass looks at (the ones the previous passes left). */
  window: number;
  /**
   * Snapshots that must stay whatever their age: the run's restore point (the snapshot its sandbox
   * pointer names, which a resume or a reconciliation restores), and every fork point in use.
   */
  keep: ReadonlySet<string>;
  /** Images that must keep their tags: the run's live sandbox's own image (the engine refuses to untag it, and a re-based sandbox runs on a snapshot's image). */
  keepImages?: ReadonlySet<string>;
  /** How many image removals run at once (the engine serializes its tag store; a few overlap the round trips). */
  parallel?: number;
}

/**
 * Retention while a run goes (issue 32): of the run's newest `keepLast + window` snapshots, those
 * older than the newest `keepLast` go, in one batch, except the snapshots `keep` names, the newest
 * one pushed to a registry (where another engine's restore goes back to when the newer pushes have
 * not landed), and images a pending delta layer is built on until that layer is loaded. Only the
 * window is read, so a pass costs the same at step 100 and step 10,000; what a pass leaves (kept,
 * or a removal that failed) is the run end's full retention's. Records stay, marked pruned.
 */
export async function pruneRunning(d: RunningPruneDeps, o: RunningPrune): Promise<Snapshot[]> {
  if ((await importedSessions(d.store)).has(o.sessionId)) return [];
  const newestFirst = (await d.store.listSnapshots({ runId: o.runId, newest: o.keepLast + o.window })).reverse();
  const older = newestFirst.slice(o.keepLast).filter((s) => s.prunedAt === null);
  if (older.length === 0) return [];
  const newestPushed = newestFirst.find((s) => s.registryRef !== null && s.prunedAt === null)?.id;
  const unkept = older.filter((s) => !o.keep.has(s.id) && s.id !== newestPushed);
  // The live sandbox's image may lose a tag only while a snapshot that stays still names it (the
  // engine refuses to remove the last tag of an image a container runs on; snapshots of an unchanged
  // workspace all name that one image, each by its own tag).
  const going = new Set(unkept.map((s) => s.id));
  const stillTagged = new Set(newestFirst.filter((s) => s.prunedAt === null && !going.has(s.id)).map((s) => s.imageId));
  const candidates = unkept.filter((s) => !o.keepImages?.has(s.imageId) || stillTagged.has(s.imageId));
  if (candidates.length === 0) return [];
  // An image still only in the store gets its tag when the engine loads it: removed before that, the
  // load would tag it again behind the record's back. It is loaded here first (the background load
  // would do the same; under load those lag behind the steps, and a pass that skipped them would
  // leave them outside the next passes' window); without a loader it waits for the run end.
  const pending = new Set((await d.store.listSnapshotDeltas()).map((x) => x.imageId));
  const deltas = await PendingDeltaParents.read(d);
  const pruned: Snapshot[] = [];
  const remove = async (s: Snapshot): Promise<void> => {
    try {
      // The record first (see pruneSnapshots): a kill between leaves a tag for gc, not a live record
      // without its image.
      await d.store.markSnapshotPruned(s.id, d.clock.now());
      faultAside('retention.running:marked');
      pruned.push(s);
    } catch (err) {
      // Left for the run end's retention (or gc): this pass only saves work.
      d.logger.warn({ runId: o.runId, snapshotId: s.id, err }, 'could not prune a snapshot of the running run; the run end retries');
      return;
    }
    try {
      const outcome = await d.removeSnapshot(s.id);
      faultMark('retention.running:pruned');
      d.logger.debug({ runId: o.runId, snapshotId: s.id, outcome }, 'snapshot of the running run pruned');
    } catch (err) {
      d.logger.warn({ runId: o.runId, snapshotId: s.id, err }, 'a pruned snapshot of the running run kept its image; berth gc removes it');
    }
  };
  // Oldest first (candidates are newest first), each removed as soon as it and the layer built
  // right on it are loaded: when the loads lag, a pass prunes as it goes instead of after loading
  // all it looks at. Newest first, the first load would take every pending layer under it.
  const removing = new Set<Promise<void>>();
  for (const s of [...candidates].reverse()) {
    if (pending.has(s.imageId) && !(d.materialize && (await d.materialize(s.imageId).catch(() => false)))) continue;
    if (!(await deltas.release(s.imageId, { runId: o.runId, snapshotId: s.id }))) continue;
    const p: Promise<void> = remove(s).finally(() => removing.delete(p));
    removing.add(p);
    if (removing.size >= Math.max(1, o.parallel ?? 2)) await Promise.race(removing);
  }
  await Promise.all(removing);
  if (pruned.length) d.logger.info({ runId: o.runId, pruned: pruned.length }, 'older snapshots of the running run pruned');
  return pruned;
}
