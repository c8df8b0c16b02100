import type { WorkspaceManifest } from './manifest';
import type { LayerDirs } from './layer-scan';
import type { ScanExec } from './scan';

/** What snapshots need from the sandbox adapter (which alone talks to Docker). */
export interface SnapshotEngine {
  commit(containerId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal; pause?: boolean }): Promise<EngineImage>;
  /** Removes an image whose tag a later commit took. */
  discardImage(imageId: string): Promise<void>;
  /** Rewrites a snapshot image as one layer under the same tag. */
  flatten(imageId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal }): Promise<EngineImage>;
  setPaused(containerId: string, paused: boolean): Promise<void>;
  /** A tar stream of a path in the container (works while it is paused). */
  archive(containerId: string, path: string): Promise<NodeJS.ReadableStream>;
  /**
   * Adds the snapshot tag `tag` to an existing image; with `storeId`, an image whose labels name no
   * store (an environment's image) also gets a tag naming that store (`berth gc --orphans` finds it by it).
   */
  tag(imageId: string, tag: string, o?: { storeId?: string }): Promise<void>;
  /** Removes the snapshot tag `tag` (and the image, when that was its last tag and nothing builds on it). */
  removeSnapshot?(tag: string): Promise<'removed' | 'untagged' | 'absent'>;
  /** Whether the container's layer changed outside `skip` since `sinceMs`; `undefined` when the engine's files cannot be read here. */
  changedOutsideSince?(containerId: string, sinceMs: number, skip: string[]): Promise<boolean | undefined>;
  /** The container's overlay directories, when this machine can read them; `undefined` makes every scan an exec in the container. */
  layerDirs?(containerId: string): Promise<LayerDirs | undefined>;
  imageExists(imageId: string): Promise<boolean>;
  /** Whether the image keeps a name of its own (not a snapshot tag) once every snapshot tag is gone. */
  imageNamedElsewhere?(imageId: string): Promise<boolean>;
  /** A local image's exact config bytes, read on this machine; `undefined` makes every snapshot a commit. */
  imageConfig?(imageId: string): Promise<Buffer | undefined>;
  /** Loads an image from its config and its one new layer (the engine holds its parents). */
  loadLayer?(o: { config: Buffer; layer: Buffer; tags: string[]; signal?: AbortSignal }): Promise<string>;
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

/** The sandbox being looked at: its container, the image it was created from, and a way to run commands in it (as root). */
export interface SnapshotTarget {
  containerId: string;
  imageId: string;
  workspacePath: string;
  exec: ScanExec;
  /** The sandbox's disk limit: a reading refuses a file bigger than it (a sparse file's holes would be written out whole by a commit). */
  diskLimitBytes?: number;
}

export interface WorkspaceState {
  digest: string;
  manifest: WorkspaceManifest;
  /** Workspace paths that differ from the previous state this process knew of the container (all of them when none). */
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
  /** Nothing changed since the previous snapshot of this container: its image was tagged again, nothing committed. */
  reused: boolean;
  /** The image's workspace manifest. */
  manifest: WorkspaceManifest;
  /** How the workspace was read: from the overlay layer on this machine (no exec), by a listing exec, or not at all (a reuse). */
  scan: 'layer' | 'exec' | 'none';
  /** Regular files whose bytes were read for this snapshot. */
  hashed: number;
  /** Built by this host as one layer over the previous image, kept in the store until the engine loads it (no `docker commit`). */
  delta?: boolean;
}
