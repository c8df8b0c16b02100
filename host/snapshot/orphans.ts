import type { Logger } from 'pino';
import { BerthError } from '../errors';
import { isFinalRunState, RUN_STATES } from '../model';
import type { Store } from '../store';
import { idTimeMs, type Clock } from '../support';
import { importedSessions, PendingDeltaParents } from './kept-images';

/** A snapshot image on the engine as the sandbox adapter lists it. */
export interface SnapshotImageSeen {
  imageId: string;
  tags: string[];
  labels: Record<string, string>;
  createdAt: number;
}

export interface OrphanDeps {
  store: Store;
  /** This store's id (`berth.store` on the containers snapshots are committed from). */
  storeId: string;
  clock: Clock;
  logger: Logger;
  /** Every snapshot image on the engine, of any host: one pulled from a registry keeps the labels of the host that committed it. */
  listSnapshotImages(): Promise<SnapshotImageSeen[]>;
  removeSnapshot(tag: string): Promise<'removed' | 'untagged' | 'absent'>;
  imageLayerBytes(imageId: string): Promise<number>;
  /** Every twin tag `berth-snapshot/<store>:<snapshot>` on the engine (tags on environment images). */
  listStoreTags?(): Promise<Array<{ storeId: string; snapshotId: string; imageId: string }>>;
}

export interface RemovedOrphan {
  snapshotId: string;
  imageId: string;
  outcome: 'removed' | 'untagged' | 'absent';
  bytes: number;
}

/**
 * Removes snapshot tags that no record of this store names: what a snapshot left when its host died
 * between the commit of the image and the commit of its record. Tags whose record is pruned go too,
 * at once: retention removes images only on the engine of the host that prunes, so the images a run
 * left on an engine it moved away from (or restored there) stay until a gc on that engine. Every snapshot image is labelled
 * (and tagged) with its intended record id before that record commits, so such images are found
 * by label. Only images of sessions this store holds are looked at (another store on the same host
 * has its own), only those older than `graceMs`, and only when their run is final: a live run may
 * be a moment away from committing the record, and a noop snapshot tags an old image anew.
 * Images are this store's whichever host committed them (not filtered by `berth.host`): a snapshot
 * pulled from a registry onto this engine keeps the committing host's labels, and a host here
 * killed between tagging it anew and committing the record leaves its tag for this gc.
 * Images of imported runs' sessions are the exporting store's, whatever tags they carry; an image
 * a pending delta layer is built on is kept (the layer's record may be about to commit, and gc
 * loads it or drops it after the grace).
 */
/** An unrecorded snapshot tag gc left in place, and why (inside the grace, or its run is not final). */
export interface KeptOrphan {
  snapshotId: string;
  imageId: string;
  why: 'grace' | 'run_unfinished';
  ageMs: number;
  runId: string | null;
}

export async function removeOrphanSnapshots(d: OrphanDeps, o: { graceMs: number; kept?: KeptOrphan[] }): Promise<RemovedOrphan[]> {
  const out: RemovedOrphan[] = [];
  const now = d.clock.now();
  const imported = await importedSessions(d.store);
  const deltas = await PendingDeltaParents.read({ store: d.store, logger: d.logger });
  for (const img of await d.listSnapshotImages()) {
    const sessionId = img.labels['berth.session'];
    const storeId = img.labels['berth.store'];
    if (storeId && storeId !== d.storeId) continue;
    if (!sessionId || imported.has(sessionId) || !(await d.store.getSession(sessionId))) continue;
    const runId = img.labels['berth.run'];
    // Tags of records pruned elsewhere (retention by a host on another engine: the run moved away,
    // or restored here and ended there): no grace, nothing will name them again.
    let pruned: string[] = [];
    for (const tag of img.tags) if ((await d.store.getSnapshot(tag))?.prunedAt != null) pruned.push(tag);
    // An image a pending delta layer is built on stays until that layer is loaded, as below.
    if (pruned.length === img.tags.length && !(await deltas.release(img.imageId, { sessionId }))) pruned = [];
    if (pruned.length) {
      const bytes = pruned.length === img.tags.length ? await d.imageLayerBytes(img.imageId) : 0;
      for (const tag of pruned) {
        const outcome = await d.removeSnapshot(tag);
        out.push({ snapshotId: tag, imageId: img.imageId, outcome, bytes: outcome === 'removed' ? bytes : 0 });
        d.logger.info({ snapshotId: tag, imageId: img.imageId, outcome }, 'image of a pruned snapshot removed');
      }
    }
    const tags = img.tags.filter((t) => !pruned.includes(t));
    if (tags.length === 0) continue;
    const unrecorded = async () => {
      const found: string[] = [];
      for (const tag of tags) if (!(await d.store.getSnapshot(tag))) found.push(tag);
      return found;
    };
    const keep = async (why: KeptOrphan['why']) => {
      for (const tag of o.kept ? await unrecorded() : []) o.kept!.push({ snapshotId: tag, imageId: img.imageId, why, ageMs: now - img.createdAt, runId: runId ?? null });
    };
    if (now - img.createdAt < o.graceMs) {
      await keep('grace');
      continue;
    }
    const run = runId ? await d.store.getRun(runId) : undefined;
    if (run && !isFinalRunState(run.state)) {
      await keep('run_unfinished');
      continue;
    }
    const orphans = await unrecorded();
    if (orphans.length === 0) continue;
    if (orphans.length === tags.length && !(await deltas.release(img.imageId, { sessionId }))) continue;
    // Bytes are freed only when the last tag goes (and nothing builds on the image).
    const bytes = orphans.length === tags.length ? await d.imageLayerBytes(img.imageId) : 0;
    for (const tag of orphans) {
      const outcome = await d.removeSnapshot(tag);
      out.push({ snapshotId: tag, imageId: img.imageId, outcome, bytes: outcome === 'removed' ? bytes : 0 });
      d.logger.info({ snapshotId: tag, imageId: img.imageId, outcome }, 'unrecorded snapshot image removed');
    }
  }
  // A fresh sandbox's first snapshot is a tag on its environment's image, which carries no snapshot
  // labels, so the listing above never sees it; its twin names this store. One whose record never
  // committed (the host was killed between the tag and the commit) is named by nothing else, and its
  // age is its id's: nothing will record it after the grace (a resumed step snapshots anew).
  // A twin names no run: while any run of the store is unfinished, one of them may be about to
  // record it (what the run check above does for labelled images, under `--grace 0` too).
  let unfinished: boolean | undefined;
  for (const t of d.listStoreTags ? await d.listStoreTags() : []) {
    if (t.storeId !== d.storeId || (await d.store.getSnapshot(t.snapshotId))) continue;
    const made = idTimeMs(t.snapshotId);
    if (made === undefined) continue;
    unfinished ??= (await d.store.listRuns({ states: RUN_STATES.filter((st) => !isFinalRunState(st)), newest: 1 })).length > 0;
    if (now - made < o.graceMs || unfinished) {
      o.kept?.push({ snapshotId: t.snapshotId, imageId: t.imageId, why: now - made < o.graceMs ? 'grace' : 'run_unfinished', ageMs: now - made, runId: null });
      continue;
    }
    const outcome = await d.removeSnapshot(t.snapshotId);
    out.push({ snapshotId: t.snapshotId, imageId: t.imageId, outcome, bytes: 0 });
    d.logger.info({ snapshotId: t.snapshotId, imageId: t.imageId, outcome }, 'unrecorded snapshot tag on an environment image removed');
  }
  return out;
}

/**
 * Refuses `keep 0` when it would leave a session that is not finished (one of its runs is not in a
 * final state) without any restore point: reconciliation of that run would have nothing to offer.
 */
export async function assertKeepAllowed(store: Store, keep: number): Promise<void> {
  if (keep > 0) return;
  // An imported run is never pruned here (its snapshots are the exporter's), so it needs no restore point kept.
  const imported = await importedSessions(store);
  const open = (await store.listRuns()).filter((r) => !isFinalRunState(r.state) && !imported.has(r.sessionId));
  const blocked: string[] = [];
  for (const run of open) {
    const snaps = await store.listSnapshots({ sessionId: run.sessionId, pruned: false, newest: 1 });
    if (snaps.length > 0) blocked.push(`${run.sessionId} (run ${run.id} is ${run.state})`);
  }
  if (blocked.length) {
    throw new BerthError('gc_refused', `--keep 0 would remove the only restore points of unfinished session(s): ${blocked.join(', ')}. Finish or cancel those runs first, or keep at least 1`);
  }
}
