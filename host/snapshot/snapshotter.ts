import type { Logger } from 'pino';
import type { Json } from '../model';
import type { Store } from '../store';
import { applyRescan, manifestDigest, type WorkspaceManifest } from './manifest';
import { scanWorkspace, type ScanExec } from './scan';
import { timed } from './timing';

/** What snapshots need from the sandbox adapter (which alone talks to Docker). */
export interface SnapshotEngine {
  commit(containerId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal; pause?: boolean }): Promise<EngineImage>;
  /** Removes an image whose tag a later commit took. */
  discardImage(imageId: string): Promise<void>;
  /** Rewrites a snapshot image as one layer under the same tag. */
  flatten(imageId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal }): Promise<EngineImage>;
  changes(containerId: string): Promise<Array<{ path: string; kind: 'modified' | 'added' | 'deleted' }>>;
}

export interface EngineImage {
  imageId: string;
  layerBytes: number;
  layers: number;
  /** Parent chain length; the engine commits nothing on an image 125 deep. */
  depth: number;
}

/** Chain depth at which a snapshot is flattened: well below the engine's 125, so a restore or re-base still fits. */
export const FLATTEN_DEPTH = 100;

/** The sandbox being looked at: its container, the image it was created from, and a way to run commands in it. */
export interface SnapshotTarget {
  containerId: string;
  imageId: string;
  workspacePath: string;
  exec: ScanExec;
}

export interface WorkspaceState {
  digest: string;
  manifest: WorkspaceManifest;
  /** Workspace paths that differ from the container's image. */
  changed: string[];
}

export interface TakenSnapshot {
  imageId: string;
  workspaceDigest: string;
  layerBytes: number;
  layers: number;
  /**
   * The image was rewritten as one layer (its chain had reached the flatten depth): the sandbox
   * must move onto it, or its next snapshot would be as deep again.
   */
  flattened: boolean;
}

/**
 * Workspace digests and snapshots whose cost follows what changed, not the workspace's size:
 * the manifest of every snapshot image is kept, and a container's state is that manifest plus a
 * rescan of the paths `docker diff` reports under the workspace.
 */
export class Snapshotter {
  constructor(private readonly d: { engine: SnapshotEngine; store: Store; logger: Logger; flattenDepth?: number }) {}

  /** Workspace paths (`./`-relative) that differ from the container's image. */
  private async changedPaths(t: SnapshotTarget): Promise<string[]> {
    const ws = t.workspacePath.replace(/\/+$/, '');
    return (await timed(this.d.logger, 'snapshot.diff', () => this.d.engine.changes(t.containerId))).filter((c) => c.path.startsWith(`${ws}/`)).map((c) => `.${c.path.slice(ws.length)}`);
  }

  async workspaceState(t: SnapshotTarget, signal?: AbortSignal): Promise<WorkspaceState> {
    const ws = t.workspacePath.replace(/\/+$/, '');
    const changed = await this.changedPaths(t);
    const base = (await timed(this.d.logger, 'snapshot.manifest_read', () => this.d.store.getWorkspaceManifest(t.imageId))) as WorkspaceManifest | undefined;
    let manifest: WorkspaceManifest;
    if (base) {
      const scan = await timed(this.d.logger, 'snapshot.scan', () => scanWorkspace(t.exec, ws, changed, signal), { paths: changed.length });
      manifest = applyRescan(base, changed, scan.entries, scan.children);
    } else {
      manifest = (await timed(this.d.logger, 'snapshot.scan', () => scanWorkspace(t.exec, ws, 'all', signal), { paths: 'all' })).entries;
      // With nothing changed yet, the scan is the image's own workspace: keep it for next time.
      if (changed.length === 0) await this.d.store.putWorkspaceManifest(t.imageId, manifest as Json);
    }
    return { digest: manifestDigest(manifest), manifest, changed };
  }

  /**
   * Commits the container into a snapshot image and records the image's workspace manifest.
   * The scan and the commit run side by side (neither waits for the other, so a snapshot costs
   * about one commit); that is sound only while nothing in the container writes, which holds
   * between steps. A writer still running in the background shows up as a different change set
   * after the commit, and the snapshot is then taken again with the container paused, in order.
   */
  async take(t: SnapshotTarget, opts: { snapshotId: string; labels: Record<string, string>; signal?: AbortSignal }): Promise<TakenSnapshot> {
    const commit = (pause: boolean) => timed(this.d.logger, 'snapshot.commit', () => this.d.engine.commit(t.containerId, { tag: opts.snapshotId, labels: opts.labels, signal: opts.signal, pause }));
    let [state, image] = await Promise.all([this.workspaceState(t, opts.signal), commit(false)]);
    const after = await this.changedPaths(t);
    // `docker diff` lists paths in no fixed order: compare them as sets.
    if (after.sort().join('\n') !== [...state.changed].sort().join('\n')) {
      this.d.logger.warn({ snapshotId: opts.snapshotId }, 'workspace changed during the snapshot; taking it again with the container paused');
      const first = image;
      state = await this.workspaceState(t, opts.signal);
      image = await commit(true);
      // The second commit took the tag; the first would linger as an unnamed image.
      await this.d.engine.discardImage(first.imageId).catch((err: unknown) => this.d.logger.warn({ err, imageId: first.imageId }, 'could not remove a superseded snapshot image'));
    }
    const flattened = image.depth >= (this.d.flattenDepth ?? FLATTEN_DEPTH);
    if (flattened) {
      const deep = image;
      image = await this.d.engine.flatten(deep.imageId, { tag: opts.snapshotId, labels: opts.labels, signal: opts.signal });
      this.d.logger.info({ snapshotId: opts.snapshotId, deepImageId: deep.imageId, depth: deep.depth, imageId: image.imageId }, 'snapshot image flattened to one layer');
    }
    await timed(this.d.logger, 'snapshot.manifest_write', () => this.d.store.putWorkspaceManifest(image.imageId, state.manifest as Json));
    this.d.logger.debug({ snapshotId: opts.snapshotId, imageId: image.imageId, changed: state.changed.length, layerBytes: image.layerBytes }, 'snapshot taken');
    return { imageId: image.imageId, workspaceDigest: state.digest, layerBytes: image.layerBytes, layers: image.layers, flattened };
  }
}
