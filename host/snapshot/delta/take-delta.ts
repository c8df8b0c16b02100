import type { Logger } from 'pino';
import type { Json } from '../../model';
import type { Store } from '../../store';
import { layerChangedPath, type LayerDirs, type LayerListing } from '../layer-scan';
import { manifestDigest, type WorkspaceManifest } from '../manifest';
import type { SnapshotEngine, TakenSnapshot } from '../snapshot-types';
import { timed } from '../timing';
import type { DeltaImages } from './delta-images';
import { buildDeltaLayer } from './delta-layer';
import type { ReadBudget } from '../confined';
import { emptyDirsOutside, sameOutside } from './outside-dirs';

/**
 * Changes of at most this much file content become a delta layer; bigger ones are committed by
 * the engine. The layer waits in the store until the engine loads it, and a big layer is better
 * kept by the engine than copied through the store (bench/RESULTS.md, plan, session 5).
 */
export const DELTA_MAX_BYTES = 1 << 20;

/** An image whose exact state is known: its workspace manifest, and the host time it was read at (changes after it are not in the image). */
export interface Base {
  imageId: string;
  manifest: WorkspaceManifest;
  markAt: number;
}

/**
 * A snapshot as a delta layer over `base`; `{ writer: true }` when the workspace moved while it
 * was read or built (a writer is running: the caller takes it frozen); or `undefined` for the
 * caller to commit the container:
 * the layer was refused (too big, a special file or hard link, a writer changed a file as it was
 * read), the workspace moved since the reading `first`, something outside the workspace changed
 * since the base image's state (a delta holds only the workspace), or the parent's config cannot
 * be read here. The record is written to the store before this returns; the engine loads the image
 * in the background.
 */
export async function takeDelta(
  d: { engine: SnapshotEngine; store: Store; logger: Logger; images: DeltaImages },
  o: { containerId: string; dirs: LayerDirs; ws: string; base: Base; first: LayerListing; maxBytes: number; budget?: ReadBudget; maxLayers: number; snapshotId: string; labels: Record<string, string>; signal?: AbortSignal },
): Promise<TakenSnapshot | { writer: true } | undefined> {
  o.signal?.throwIfAborted();
  // Outside the workspace, only empty directories can be in the layer (a compiler's /tmp after a build step).
  // Anything else there is the engine's to commit, said once the layer was built (as before: a
  // writer seen by the build still gets the frozen take).
  const outside = (await d.engine.changedOutsideSince?.(o.containerId, o.base.markAt, [o.ws])) === false ? [] : emptyDirsOutside(o.dirs, o.ws, o.base.markAt);
  // A layer this code cannot write (a time or owner a tar header cannot hold, a file gone at the
  // wrong moment) is the engine's to commit, never a failed snapshot.
  const layer = await timed(d.logger, 'snapshot.delta_build', () => buildDeltaLayer({ dirs: o.dirs, ws: o.ws, base: o.base.manifest, now: o.first.manifest, since: o.base.markAt, maxBytes: o.maxBytes, outside: outside ?? [], ...(o.budget ? { budget: o.budget } : {}) })).catch((err: unknown) => {
    // A cancel stops the snapshot; anything else (a bound, a file the writer cannot hold) leaves it to the engine's commit.
    if (o.signal?.aborted) throw err;
    return { refused: `the layer could not be written: ${err instanceof Error ? err.message : String(err)}` };
  });
  if ('refused' in layer) {
    d.logger.debug({ snapshotId: o.snapshotId, reason: layer.refused }, 'snapshot committed by the engine, not as a delta layer');
    return 'writer' in layer && layer.writer ? { writer: true } : undefined;
  }
  // The layer holds what the reading found only if nothing moved since (the commit path's own
  // check then finds the writer and takes the snapshot paused).
  if ((await timed(d.logger, 'snapshot.layer_verify', () => layerChangedPath(o.dirs, o.ws, o.first, o.budget))) !== null) return { writer: true };
  // Checked after the layer was built, so a write outside during it is seen here.
  const after = !outside ? undefined : outside.length === 0 && (await d.engine.changedOutsideSince?.(o.containerId, o.base.markAt, [o.ws])) === false ? [] : emptyDirsOutside(o.dirs, o.ws, o.base.markAt);
  if (!outside || !after || !sameOutside(outside, after)) {
    d.logger.debug({ snapshotId: o.snapshotId }, 'snapshot committed by the engine: the container changed outside the workspace');
    return undefined;
  }
  const image = await timed(d.logger, 'snapshot.delta_write', () => d.images.create({ parentImageId: o.base.imageId, layer, labels: o.labels, snapshotId: o.snapshotId, maxLayers: o.maxLayers }));
  if (!image) return undefined;
  await timed(d.logger, 'snapshot.manifest_write', () => d.store.putWorkspaceManifest(image.imageId, o.first.manifest as Json));
  d.images.soon(image.imageId);
  d.logger.debug({ snapshotId: o.snapshotId, imageId: image.imageId, parentImageId: o.base.imageId, layerBytes: layer.tar.length, entries: layer.entries, whiteouts: layer.whiteouts }, 'snapshot taken as a delta layer');
  return { imageId: image.imageId, workspaceDigest: manifestDigest(o.first.manifest), layerBytes: layer.tar.length, layers: image.layers, flattened: false, reused: false, manifest: o.first.manifest, scan: 'layer', hashed: o.first.hashed, delta: true };
}
