import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError } from '../../errors';
import type { Store } from '../../store';
import type { DeltaLayer } from './delta-layer';

/** The engine calls a delta image needs (the sandbox adapter's `snapshotEngine`). */
export interface DeltaEngine {
  imageExists(imageId: string): Promise<boolean>;
  tag(imageId: string, tag: string, o?: { storeId?: string }): Promise<void>;
  /** A local image's exact config bytes; `undefined` when they cannot be read on this machine. */
  imageConfig?(imageId: string): Promise<Buffer | undefined>;
  /** Loads an image from its config and its last layer (the engine holds the others); its id. */
  loadLayer?(o: { config: Buffer; layer: Buffer; tags: string[]; signal?: AbortSignal }): Promise<string>;
}

type DeltaStore = Pick<Store, 'putSnapshotDelta' | 'getSnapshotDelta' | 'deleteSnapshotDelta'>;

type ImageConfig = {
  created?: string;
  config?: { Labels?: Record<string, string> | null } & Record<string, unknown>;
  rootfs: { type: string; diff_ids: string[] };
  history?: Array<Record<string, unknown>>;
} & Record<string, unknown>;

/**
 * Snapshot images built by this host as one small layer over their parent, rather than by
 * `docker commit` (whose fixed cost, ~100-500 ms, is the whole of a small snapshot). The image's
 * id is the sha256 of its config, which the host writes itself, so a snapshot record can name the
 * image before the engine holds it: the config and the layer are kept in the store first, and the
 * engine loads them in the background (or on demand: a restore, a re-base, a push, a fork, a tag).
 * Once loaded, the store's copy is deleted; the engine's image is then like any committed one.
 */
export class DeltaImages {
  private readonly loading = new Map<string, Promise<boolean>>();
  private readonly background = new Set<Promise<unknown>>();

  constructor(private readonly d: { engine: DeltaEngine; store: DeltaStore; logger: Logger }) {}

  /** Whether this engine can take delta images (its image store is readable here and it loads archives). */
  get supported(): boolean {
    return this.d.engine.imageConfig !== undefined && this.d.engine.loadLayer !== undefined;
  }

  /**
   * Records a new image: the parent's config with `layer` on top, `labels` added and a history
   * entry for the layer. `undefined` when the parent's config cannot be read here, or when the
   * chain would reach `maxLayers` (the caller commits, and flattens).
   */
  async create(o: { parentImageId: string; layer: DeltaLayer; labels: Record<string, string>; snapshotId: string; maxLayers: number }): Promise<{ imageId: string; layers: number } | undefined> {
    const image = await this.configOf(o);
    if (!image) return undefined;
    await this.d.store.putSnapshotDelta({ imageId: image.imageId, parentImageId: o.parentImageId, snapshotId: o.snapshotId, config: image.config, layer: o.layer.tar, createdAt: Date.now() });
    return { imageId: image.imageId, layers: image.layers };
  }

  /**
   * The image {@link create} would record, loaded into the engine straight from memory instead of
   * through the store: for an image nothing will name before the engine holds it (the upload
   * layer: its snapshot record commits after the lease made from it), a round trip of the whole
   * layer through the store (written, read back, deleted) is pure cost on the run's critical path.
   * A host killed before the load leaves nothing; after it, an unrecorded image for gc, as a commit
   * does. The parent must be on the engine (a missing one is the load's `image_missing`);
   * `beforeLoad` runs between the config and the load (a test's fault point).
   */
  async loadDirect(o: { parentImageId: string; layer: DeltaLayer; labels: Record<string, string>; snapshotId: string; maxLayers: number; signal?: AbortSignal; beforeLoad?: () => void }): Promise<{ imageId: string; layers: number } | undefined> {
    if (!this.d.engine.loadLayer) return undefined;
    const image = await this.configOf(o);
    if (!image) return undefined;
    o.beforeLoad?.();
    const loaded = await this.d.engine.loadLayer({ config: image.config, layer: o.layer.tar, tags: [o.snapshotId], signal: o.signal });
    if (loaded !== image.imageId) throw new BerthError('image_missing', `loading snapshot image ${image.imageId.slice(7, 19)} gave ${loaded.slice(7, 19)}`, { details: { imageId: image.imageId, loaded } });
    return { imageId: image.imageId, layers: image.layers };
  }

  /** The parent's config with the layer on top (see {@link create}); `undefined` when it cannot be made here. */
  private async configOf(o: { parentImageId: string; layer: DeltaLayer; labels: Record<string, string>; snapshotId: string; maxLayers: number }): Promise<{ imageId: string; config: Buffer; layers: number } | undefined> {
    const parent = (await this.d.store.getSnapshotDelta(o.parentImageId))?.config ?? (await this.d.engine.imageConfig?.(o.parentImageId));
    if (!parent) return undefined;
    const cfg = JSON.parse(parent.toString('utf8')) as ImageConfig;
    const layers = cfg.rootfs.diff_ids.length + 1;
    if (layers >= o.maxLayers) return undefined;
    const created = new Date().toISOString();
    // A commit's container fields describe the container it came from; this layer came from none.
    const { container: _c, container_config: _cc, ...rest } = cfg;
    const next: ImageConfig = {
      ...rest,
      created,
      config: { ...(cfg.config ?? {}), Labels: { ...(cfg.config?.Labels ?? {}), ...o.labels } },
      rootfs: { type: 'layers', diff_ids: [...cfg.rootfs.diff_ids, o.layer.diffId] },
      // One history entry per layer, as the engine counts them (a commit on this image adds one more).
      history: [...(cfg.history ?? []), { created, created_by: 'berth snapshot delta', comment: o.snapshotId }],
    };
    const config = Buffer.from(JSON.stringify(next));
    return { imageId: `sha256:${createHash('sha256').update(config).digest('hex')}`, config, layers };
  }

  /** Loads the image in the background; {@link settle} waits for every such load. */
  soon(imageId: string): void {
    const p = this.materialize(imageId).catch((err: unknown) => this.d.logger.warn({ err, imageId }, 'could not load a snapshot image into the engine yet; it stays in the store and is loaded when needed'));
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  /** Waits for every background load of this process. */
  async settle(): Promise<void> {
    while (this.background.size) await Promise.allSettled([...this.background]);
  }

  /**
   * Makes sure the engine holds the image, loading it (and its pending parents first) from the
   * store. False when neither holds it. One load per image at a time in this process; another
   * process loading the same image gives the same id, as the id is the config's digest.
   */
  materialize(imageId: string, signal?: AbortSignal): Promise<boolean> {
    const running = this.loading.get(imageId);
    if (running) return running;
    const p = this.load(imageId, signal).finally(() => this.loading.delete(imageId));
    this.loading.set(imageId, p);
    return p;
  }

  private async load(imageId: string, signal?: AbortSignal): Promise<boolean> {
    if (await this.d.engine.imageExists(imageId)) {
      // A load the engine finished after its host died (SIGKILLed between the load and the delete
      // below) leaves the row behind. Kept, it would load the image again, with its snapshot's
      // tag, once retention had removed it: a pruned snapshot tagged behind its record's back.
      await this.d.store.deleteSnapshotDelta(imageId);
      return true;
    }
    const delta = await this.d.store.getSnapshotDelta(imageId);
    if (!delta) return false;
    if (!this.d.engine.loadLayer) throw new BerthError('image_missing', `snapshot image ${imageId.slice(7, 19)} is kept in the store as a layer, and this engine cannot load it here`, { details: { imageId } });
    if (!(await this.materialize(delta.parentImageId, signal))) {
      throw new BerthError('image_missing', `snapshot image ${imageId.slice(7, 19)} cannot be loaded: its parent ${delta.parentImageId.slice(7, 19)} is gone`, { details: { imageId, parentImageId: delta.parentImageId } });
    }
    const loaded = await this.d.engine.loadLayer({ config: delta.config, layer: delta.layer, tags: [delta.snapshotId], signal });
    if (loaded !== imageId) throw new BerthError('image_missing', `loading snapshot image ${imageId.slice(7, 19)} gave ${loaded.slice(7, 19)}`, { details: { imageId, loaded } });
    await this.d.store.deleteSnapshotDelta(imageId);
    this.d.logger.debug({ imageId, snapshotId: delta.snapshotId, layerBytes: delta.layer.length }, 'snapshot image loaded into the engine');
    return true;
  }

  /** Whether the image is on the engine or kept in the store to be loaded. */
  readonly exists = async (imageId: string): Promise<boolean> => (await this.d.engine.imageExists(imageId)) || (await this.d.store.getSnapshotDelta(imageId)) !== undefined;

  /** Tags the image for a snapshot, loading it first when it is only in the store. */
  readonly tag = async (imageId: string, tag: string, o?: { storeId?: string }): Promise<void> => {
    await this.materialize(imageId);
    await this.d.engine.tag(imageId, tag, o);
  };
}
