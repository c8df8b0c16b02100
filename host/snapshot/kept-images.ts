import type { Logger } from 'pino';
import type { Store } from '../store';

/**
 * Sessions of imported runs. Their snapshot records name images the exporting store made (on the
 * same engine, often): retention and gc of this store never remove, untag or mark them.
 */
export async function importedSessions(store: Pick<Store, 'listImportedRuns'>): Promise<Set<string>> {
  return new Set((await store.listImportedRuns()).map((r) => r.sessionId));
}

/**
 * Removing snapshot images while layers kept in the store (`snapshot_deltas`, not yet loaded by
 * the engine) are built on them. A pending delta names its parent image by id only: the engine
 * does not know the child yet, so removing the parent's last tag deletes the layers the delta
 * needs and it can never be loaded. Every image on a pending delta's parent chain is in use.
 */
export class PendingDeltaParents {
  /** Image id -> the pending deltas built on it, directly or through other pending deltas. */
  private children = new Map<string, string[]>();
  /** Pending delta -> the image it is built on. */
  private parentOf = new Map<string, string>();

  private constructor(private readonly d: { store: Pick<Store, 'listSnapshotDeltas'>; logger: Logger; materialize?: (imageId: string) => Promise<boolean> }) {}

  static async read(d: { store: Pick<Store, 'listSnapshotDeltas'>; logger: Logger; materialize?: (imageId: string) => Promise<boolean> }): Promise<PendingDeltaParents> {
    const p = new PendingDeltaParents(d);
    await p.reread();
    return p;
  }

  private async reread(): Promise<void> {
    const pending = await this.d.store.listSnapshotDeltas();
    const parentOf = new Map(pending.map((x) => [x.imageId, x.parentImageId]));
    const children = new Map<string, string[]>();
    for (const x of pending) {
      // Up the chain: a pending delta may stand on another pending delta, and that on an image.
      const seen = new Set<string>();
      for (let up = x.parentImageId; !seen.has(up); up = parentOf.get(up)!) {
        seen.add(up);
        children.set(up, [...(children.get(up) ?? []), x.imageId]);
        if (!parentOf.has(up)) break;
      }
    }
    this.children = children;
    this.parentOf = parentOf;
  }

  /**
   * Whether the image may go now: it is no pending delta's parent, or the pending deltas built
   * right on it were loaded into the engine first (which then holds their layers, whatever becomes
   * of this image; a pending delta further up then stands on a loaded one). Without a loader (or
   * when a load fails) the image is kept, and said.
   */
  async release(imageId: string, ids: Record<string, string>): Promise<boolean> {
    const built = this.children.get(imageId);
    if (!built) return true;
    if (this.d.materialize) {
      try {
        // Only the direct ones: loading every pending delta up the chain (a whole run's, when the
        // background loads lag) held a running run's first prune back until all were in (seen on
        // a loaded machine: none pruned by step 120). A delta added meanwhile is seen on the reread.
        const loaded: string[] = [];
        for (let round = 0; round < 3; round++) {
          const direct = (this.children.get(imageId) ?? []).filter((c) => this.parentOf.get(c) === imageId);
          if (direct.length === 0) break;
          for (const child of direct) if (!(await this.d.materialize(child))) throw new Error(`layer ${child} is neither in the store nor on the engine`);
          loaded.push(...direct);
          await this.reread();
        }
        const still = this.children.get(imageId);
        if (still) throw new Error(`layers ${still.join(', ')} are still built on it`);
        this.d.logger.info({ ...ids, imageId, loaded }, 'snapshot layers built on the image loaded into the engine before it goes');
        return true;
      } catch (err) {
        this.d.logger.warn({ ...ids, imageId, err }, 'snapshot image kept: layers kept in the store are built on it and could not be loaded');
        return false;
      }
    }
    this.d.logger.info({ ...ids, imageId, pending: built }, 'snapshot image kept: layers kept in the store are built on it');
    return false;
  }
}
