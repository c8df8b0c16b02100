import type { Logger } from 'pino';
import { BerthError } from '../errors';
import type { Json } from '../model';
import type { Store } from '../store';
import { manifestDigest, type WorkspaceManifest } from './manifest';
import { changedOutside, listWorkspace, type Listing, type StatEntry } from './scan';
import { manifestFromTar } from './tar-manifest';
import { changedPaths, sameListing } from './listing-compare';
import { layerChangedPath, layerWorkspace, scanLayer, type LayerDirs, type LayerListing } from './layer-scan';
import { timed } from './timing';
import { DEFAULT_READ_BOUNDS, ReadBudget, type ReadBounds } from './confined';
import { DeltaImages } from './delta/delta-images';
import { takeDelta, DELTA_MAX_BYTES, type Base } from './delta/take-delta';
import { FLATTEN_DEPTH, type EngineImage, type SnapshotEngine, type SnapshotTarget, type TakenSnapshot, type WorkspaceState } from './snapshot-types';

export { FLATTEN_DEPTH, type EngineImage, type SnapshotEngine, type SnapshotTarget, type TakenSnapshot, type WorkspaceState } from './snapshot-types';

/** The margin `changedOutsideSince` allows for the kernel's coarse file clock. */
const FILE_CLOCK_MARGIN_MS = 25;

/**
 * Refuses a workspace holding a name that starts with `.wh.`: in an image layer such a file is the
 * removal of its namesake, so neither a commit nor a restore could keep it (the restore's digest
 * check then fails). Said at the snapshot, naming the path, rather than at a resume.
 */
function assertLayerSafe(manifest: WorkspaceManifest, snapshotId: string): void {
  const bad = Object.keys(manifest).find((p) => p.includes('/.wh.'));
  if (bad) throw new BerthError('snapshot_unrepresentable', `workspace path ${bad}: a name starting with .wh. cannot be kept in a container image (a layer reads it as the removal of ${bad.replace('/.wh.', '/')}); rename it`, { ids: { snapshotId } });
}

/** Paused attempts when a writer keeps changing the workspace. */
const ATTEMPTS = 3;

/** The workspace as a snapshot read it first: a listing exec, or a layer scan (`layer`; no stat fields then). */
type Reading = Pick<Listing, 'manifest' | 'complete' | 'root' | 'hashed' | 'stats'> & { now?: number; startedAt: number; layer?: LayerListing };

/** What this process last saw of a live container: the stat cache. */
interface Known {
  stats: Map<string, StatEntry>;
  /** The container's clock when the listing that gave `stats` started (for racy entries). */
  now?: number;
  manifest: WorkspaceManifest;
  /** An image whose workspace and whole filesystem equal this state (the last snapshot, or the image a fresh container came from). */
  imageId: string | null;
  /** Host clock (ms) before that image's state was listed: a change outside the workspace after it means the image no longer stands for the container. */
  markAt?: number;
  /** Host clock (ms) before the listing that gave `stats` (or before a layer scan): nothing in the layer changed since means the listing still holds. */
  listedAt?: number;
  /** The newest image whose state this process knows exactly, kept while later readings move on: what a delta layer is built over. */
  base?: Base;
  /** `manifest`'s digest, once computed; for that very object (a copy of this record with another manifest does not reuse it). */
  digested?: { manifest: WorkspaceManifest; digest: string };
}

/** The digest of what `k` knows: hashed once per manifest (a writing tool call's reading compared and returned it three times). */
function knownDigest(k: Known): string {
  if (k.digested?.manifest !== k.manifest) k.digested = { manifest: k.manifest, digest: manifestDigest(k.manifest) };
  return k.digested.digest;
}

/** A reading's state; the changed paths are listed only when asked for (a verification's mismatch message). */
function stateOf(digest: string, manifest: WorkspaceManifest, before: WorkspaceManifest): WorkspaceState {
  let changed: string[] | undefined;
  return {
    digest,
    manifest,
    get changed() {
      return (changed ??= changedPaths(before, manifest));
    },
  };
}

/** What a snapshot is taken with. */
export interface TakeOptions {
  snapshotId: string;
  labels: Record<string, string>;
  signal?: AbortSignal;
  /** Told the container's upper directory as an engine commit of it starts (a push's early upload of its layer). */
  onCommit?: (upperDir: string) => void;
}

/**
 * Workspace digests and snapshots whose cost follows what changed: one listing exec stats the
 * whole workspace and re-hashes only files whose size, times or inode differ from what this
 * process saw last in the same container (a stat cache, as git's index). The cache lives in
 * memory, per container, so it is trusted only inside a live lease of this process; a restore
 * or a verification after a restart re-hashes every file, which is what catches a changed byte
 * behind an unchanged size and a reset mtime (ctime, which user space cannot set, is in the key
 * too).
 */
export class Snapshotter {
  private readonly known = new Map<string, Known>();
  /** The fallback to listing execs is logged once per process. */
  private saidFallback = false;
  /** The store's id, asked once (a PostgreSQL store answers it with a query): a store keeps its id. */
  private storeIdP?: Promise<string>;
  private storeId(): Promise<string> {
    this.storeIdP ??= this.d.store.storeId().catch((err: unknown) => {
      this.storeIdP = undefined;
      throw err;
    });
    return this.storeIdP;
  }

  /** Snapshot images built as one small layer by this host (no `docker commit`), kept in the store until the engine loads them. */
  readonly images: DeltaImages;

  /**
   * `deltaMaxBytes`: a change of at most this much file content is snapshotted as a delta layer
   * (default {@link DELTA_MAX_BYTES}; 0 turns deltas off); a bigger one is committed by the engine.
   */
  constructor(private readonly d: { engine: SnapshotEngine; store: Store; logger: Logger; flattenDepth?: number; deltaMaxBytes?: number; readBounds?: Partial<ReadBounds> }) {
    this.images = new DeltaImages({ engine: d.engine, store: d.store, logger: d.logger });
  }

  /**
   * The cost bounds of one reading of `t`'s files on this host (the host's budget, and the
   * sandbox's disk limit), stopped by `signal`.
   */
  private budget(t: SnapshotTarget, signal?: AbortSignal): ReadBudget {
    return new ReadBudget({ ...DEFAULT_READ_BOUNDS, ...(t.diskLimitBytes !== undefined ? { diskLimitBytes: t.diskLimitBytes } : {}), ...this.d.readBounds }, signal);
  }

  private list(t: SnapshotTarget, prev: Pick<Known, 'stats' | 'manifest' | 'now'> | undefined, mode: 'hash' | 'mark' | 'promote' | 'nohash', signal?: AbortSignal): Promise<Listing> {
    return timed(this.d.logger, 'snapshot.scan', () => listWorkspace(t.exec, t.workspacePath.replace(/\/+$/, ''), prev ?? null, { mode, signal }), { cached: prev !== undefined, mode });
  }

  /**
   * The workspace's current digest. `trust: false` (verification of a sandbox this process did
   * not watch: after a restart, or a restore) ignores the cache and hashes every file (on the host
   * from the overlay layer when it can be read here, else in the container). `imageId`
   * and `createdAt`: the container was made from that image at that time (a restore), so while its
   * layer shows no change since, the image stands for it.
   */
  async workspaceState(t: SnapshotTarget, signal?: AbortSignal, o: { trust?: boolean; imageId?: string; createdAt?: number } = {}): Promise<WorkspaceState> {
    const prev = o.trust === false ? undefined : this.known.get(t.containerId);
    // Untrusted, the layer scan starts from nothing and hashes every file, on the host, with no exec.
    const layer = await this.layer(t);
    if (layer) {
      const l = await this.scanLayer(t, layer, prev, signal);
      if (l.complete) {
        const digest = manifestDigest(l.manifest);
        const same = prev !== undefined && digest === knownDigest(prev);
        const fresh = !same && o.imageId && o.createdAt !== undefined ? { imageId: o.imageId, manifest: l.manifest, markAt: o.createdAt } : undefined;
        const base = fresh ?? prev?.base;
        this.known.set(t.containerId, { stats: new Map(), manifest: l.manifest, digested: { manifest: l.manifest, digest }, imageId: same ? prev.imageId : (fresh?.imageId ?? null), listedAt: l.startedAt, ...(same && prev.markAt !== undefined ? { markAt: prev.markAt } : fresh ? { markAt: fresh.markAt } : {}), ...(base ? { base } : {}) });
        const before = prev?.manifest ?? ((await this.d.store.getWorkspaceManifest(t.imageId)) as WorkspaceManifest | undefined) ?? {};
        return stateOf(digest, l.manifest, before);
      }
    }
    if (prev && (await this.unchangedSince(t, prev.listedAt))) {
      const digest = manifestDigest(prev.manifest);
      return { digest, manifest: prev.manifest, changed: [] };
    }
    const listedAt = Date.now();
    const l = await this.list(t, prev, 'hash', signal);
    const before = prev?.manifest ?? ((await this.d.store.getWorkspaceManifest(t.imageId)) as WorkspaceManifest | undefined) ?? {};
    if (!l.complete) {
      // Something the owner cannot list or read: the engine reads it all, as real root.
      this.known.delete(t.containerId);
      const manifest = await this.readThroughEngine(t, l.root, signal);
      return { digest: manifestDigest(manifest), manifest, changed: changedPaths(before, manifest) };
    }
    const digest = manifestDigest(l.manifest);
    const same = prev !== undefined && digest === manifestDigest(prev.manifest);
    // A verified fresh container equals its image: later snapshots may point back at it when nothing changes.
    const fresh = !same && o.imageId && o.createdAt !== undefined ? { imageId: o.imageId, manifest: l.manifest, markAt: o.createdAt } : undefined;
    const base = fresh ?? prev?.base;
    this.known.set(t.containerId, { stats: l.stats, now: l.now, manifest: l.manifest, imageId: same ? prev.imageId : (o.imageId ?? null), listedAt, ...(same && prev.markAt !== undefined ? { markAt: prev.markAt } : fresh ? { markAt: fresh.markAt } : {}), ...(base ? { base } : {}) });
    return { digest, manifest: l.manifest, changed: changedPaths(before, l.manifest) };
  }

  /**
   * Seeds the cache of a container just made from a snapshot image whose manifest is known
   * (a re-base): its stat fields are listed without hashing, and each file takes its hash from
   * the manifest. Sound because the image holds exactly that manifest (checked when it was taken).
   */
  async adopt(t: SnapshotTarget, manifest: WorkspaceManifest, signal?: AbortSignal): Promise<void> {
    if (await this.layer(t)) {
      // A fresh container's upper layer holds only what it wrote since it was made: a layer scan
      // from time 0 looks at exactly that, so the image's manifest needs no listing at all.
      const markAt = Date.now();
      this.known.set(t.containerId, { stats: new Map(), manifest, imageId: t.imageId, markAt, listedAt: 0, base: { imageId: t.imageId, manifest, markAt } });
      return;
    }
    const l = await this.list(t, undefined, 'nohash', signal);
    const paths = Object.keys(manifest);
    const fits = paths.length === l.stats.size && paths.every((p) => l.stats.has(p) && (manifest[p]!.startsWith('f:') === l.stats.get(p)!.regular));
    if (!fits) return;
    // The marker: nothing outside the workspace changed yet in this fresh container.
    const markAt = Date.now();
    await t.exec(['sh', '-c', ': > /dev/shm/.berth-snapmark'], { signal });
    this.known.set(t.containerId, { stats: l.stats, now: l.now, manifest, imageId: t.imageId, markAt, listedAt: markAt, base: { imageId: t.imageId, manifest, markAt } });
  }

  /** The container's overlay directories when the workspace can be read there on this machine. */
  private async layer(t: SnapshotTarget): Promise<LayerDirs | undefined> {
    const dirs = await this.d.engine.layerDirs?.(t.containerId);
    if (dirs && (await layerWorkspace(dirs, t.workspacePath))) return dirs;
    if (!this.saidFallback) {
      this.saidFallback = true;
      this.d.logger.info({ containerId: t.containerId, workspace: t.workspacePath, reason: dirs ? 'the workspace is not a plain directory in the merged layer' : 'the engine layer is not overlay2 or not readable here' }, 'snapshots read this workspace with a listing exec in the sandbox (slower: two engine round trips per snapshot)');
    }
    return undefined;
  }

  /** A layer scan from what this process last knew of the container (every file hashed without it). */
  private scanLayer(t: SnapshotTarget, dirs: LayerDirs, prev: Known | undefined, signal?: AbortSignal): Promise<LayerListing> {
    const from = prev && prev.listedAt !== undefined ? { manifest: prev.manifest, since: prev.listedAt } : null;
    return timed(this.d.logger, 'snapshot.layer_scan', () => scanLayer(dirs, t.workspacePath, from, this.budget(t, signal)), { cached: from !== null });
  }

  /** `root`: the workspace with symlinks resolved, as a listing found it (the engine would archive a symlink itself). */
  private readThroughEngine(t: SnapshotTarget, root: string, signal?: AbortSignal): Promise<WorkspaceManifest> {
    return timed(this.d.logger, 'snapshot.archive_scan', async () => manifestFromTar(await this.d.engine.archive(t.containerId, root || t.workspacePath.replace(/\/+$/, '')), signal));
  }

  /** Tags the previous image for this snapshot: nothing changed since it was taken. */
  private async reuse(containerId: string, prev: Known, stats: Map<string, StatEntry>, snapshotId: string): Promise<TakenSnapshot> {
    // A delta image still in the store is loaded first (its background load is usually done by now).
    // The previous image may be the environment's (a fresh sandbox's first snapshot): its tag names the store too.
    const storeId = await this.storeId();
    await timed(this.d.logger, 'snapshot.tag', () => this.images.tag(prev.imageId!, snapshotId, { storeId }));
    this.known.set(containerId, { ...prev, stats });
    this.d.logger.debug({ snapshotId, imageId: prev.imageId }, 'snapshot unchanged: the previous image is reused');
    return { imageId: prev.imageId!, workspaceDigest: manifestDigest(prev.manifest), layerBytes: 0, layers: 0, flattened: false, reused: true, manifest: prev.manifest, scan: 'none', hashed: 0 };
  }

  /**
   * True when the engine's layer files show no change at all in the container since `since`
   * (one walk of its upper directory, no exec); false when something changed or that cannot be told here.
   */
  private async unchangedSince(t: SnapshotTarget, since: number | undefined): Promise<boolean> {
    return (await this.layerChanged(t, since)) === false;
  }

  /** Whether anything at all changed in the container's layer since `since`; `undefined` when that cannot be told here. */
  private async layerChanged(t: SnapshotTarget, since: number | undefined): Promise<boolean | undefined> {
    if (since === undefined || !this.d.engine.changedOutsideSince) return undefined;
    return timed(this.d.logger, 'snapshot.layer_check', () => this.d.engine.changedOutsideSince!(t.containerId, since, []));
  }

  /**
   * Whether anything outside the workspace changed since the image `prev` names was taken: from the
   * engine's layer files when this machine can read them (cost follows the container's changes),
   * else by walking the container's root filesystem (cost follows the image's size).
   */
  private async outside(t: SnapshotTarget, ws: string, root: string, prev: Known, signal?: AbortSignal): Promise<boolean> {
    return timed(this.d.logger, 'snapshot.outside', async () => {
      if (prev.markAt !== undefined && this.d.engine.changedOutsideSince) {
        const seen = await this.d.engine.changedOutsideSince(t.containerId, prev.markAt, [ws, root].filter(Boolean));
        if (seen !== undefined) return seen;
      }
      return changedOutside(t.exec, ws, root, signal);
    });
  }

  /**
   * The snapshot of a container just made from its image, with no command run in it yet: that image
   * itself, tagged for `snapshotId` (no engine commit, which copied the image's state at ~160 ms
   * here). Its workspace is read from the container, as a restore reads it, and what is known of
   * the container builds on the image, so the next snapshot is a tag or a delta over it.
   * `undefined` when the image has no name of its own besides snapshot tags: retention removing the
   * last snapshot tag would then remove the image under everything else made from it.
   * @param createdAt a time after the container started (the engine's own mount points are in its layer by then).
   */
  async ofFreshImage(t: SnapshotTarget, snapshotId: string, createdAt: number, signal?: AbortSignal): Promise<(WorkspaceState & { imageId: string }) | undefined> {
    if (!this.d.engine.imageNamedElsewhere || !(await this.d.engine.imageNamedElsewhere(t.imageId))) return undefined;
    const state = await this.workspaceState(t, signal, { trust: false, imageId: t.imageId, createdAt });
    // Manifests are kept per image: another environment on the same image with another workspace
    // (path, owner) already gave this image a different one, which its snapshots' diffs read.
    const kept = (await this.d.store.getWorkspaceManifest(t.imageId)) as WorkspaceManifest | undefined;
    if (kept && manifestDigest(kept) !== state.digest) {
      this.known.delete(t.containerId);
      return undefined;
    }
    if (!kept) await this.d.store.putWorkspaceManifest(t.imageId, state.manifest as Json);
    // The environment's labels name no store: a twin tag names it (what `berth gc --orphans` finds once its file is deleted).
    const storeId = await this.storeId();
    await timed(this.d.logger, 'snapshot.tag', () => this.d.engine.tag(t.imageId, snapshotId, { storeId }));
    return { ...state, imageId: t.imageId };
  }

  /** Removes the image tag of a snapshot whose record will never commit. */
  async discard(snapshotId: string): Promise<void> {
    // A delta image is loaded into the engine in the background, tagged as it lands: removed before
    // its load ended, the tag came back after, an image no record names (berth-api's stopped drive,
    // under load: "no snapshot record snap_..."). The loads of this process end first.
    await this.images.settle();
    await this.d.engine.removeSnapshot?.(snapshotId).catch((err: unknown) => this.d.logger.warn({ err, snapshotId }, 'could not remove an unrecorded snapshot image; gc will'));
  }

  /** Drops what is known of a container (released, lost, or handed to another holder). */
  forget(containerId: string): void {
    this.known.delete(containerId);
  }

  /**
   * Commits the container into a snapshot image and records the image's workspace manifest.
   * When neither the workspace nor anything outside it changed since this container's previous
   * snapshot, the previous image is tagged for this snapshot instead (no commit). Otherwise the
   * listing and the commit run side by side, and a second listing after the commit must equal
   * the first (same stat fields, same hashes of recently changed files), or a writer was running:
   * the snapshot is then taken with the container paused, its workspace read through the engine.
   */
  async take(t: SnapshotTarget, opts: TakeOptions): Promise<TakenSnapshot> {
    try {
      return await this.takeOnce(t, opts);
    } catch (err) {
      // What this process knew may no longer hold (a half-done attempt); the next one starts afresh.
      this.known.delete(t.containerId);
      // No record will ever name this attempt's image (a retry takes a new id): remove it now
      // rather than leave it to gc. Only its own tag goes; an image another record shares stays.
      await this.d.engine.removeSnapshot?.(opts.snapshotId).catch((e: unknown) => this.d.logger.warn({ err: e, snapshotId: opts.snapshotId }, 'could not remove the image of a failed snapshot; gc will'));
      throw err;
    }
  }

  private async takeOnce(t: SnapshotTarget, opts: TakeOptions): Promise<TakenSnapshot> {
    const prev = this.known.get(t.containerId);
    const ws = t.workspacePath.replace(/\/+$/, '');
    // Changed for sure (a file time well after the previous commit began), or maybe (within the file
    // clock's margin of it: only the listing can tell), or not at all.
    const surely = prev?.imageId && prev.markAt !== undefined ? await this.layerChanged(t, prev.markAt + 2 * FILE_CLOCK_MARGIN_MS) : undefined;
    const layer = surely === true ? true : prev?.imageId ? await this.layerChanged(t, prev.markAt) : undefined;
    if (prev?.imageId && layer === false) {
      // Nothing in the container's layer changed since the previous image's state was listed.
      return this.reuse(t.containerId, prev, prev.stats, opts.snapshotId);
    }
    const dirs = await this.layer(t);
    // The engine's own paused commit whenever nothing of ours needs the container meanwhile (the
    // workspace is read on the host): the engine copies the layer by path as root, so a command still
    // swapping a directory for a link to / while it copies makes the engine open host files (seen:
    // the exchange racer test's root-only marker opened once in a full suite run). A frozen container
    // cannot swap, and the engine unpauses it itself when the commit ends, on every path. A reading
    // by exec cannot run in a paused container, so that path keeps the unpaused commit.
    const commit = (pause: boolean) =>
      timed(this.d.logger, 'snapshot.commit', () => {
        if (dirs) opts.onCommit?.(dirs.upper);
        return this.d.engine.commit(t.containerId, { tag: opts.snapshotId, labels: opts.labels, signal: opts.signal, pause: pause || dirs !== undefined });
      });
    const markAt = Date.now();
    // The workspace read once: from the overlay layer on this machine when it can be read there
    // (no exec; only what changed since the previous reading is looked at), else by a listing exec.
    const read = async (): Promise<Reading> => {
      const r: Reading = dirs ? await this.scanLayer(t, dirs, prev, opts.signal).then((l) => ({ ...l, root: ws, stats: new Map(), layer: l })) : { ...(await this.list(t, prev, 'mark', opts.signal)), startedAt: markAt };
      assertLayerSafe(r.manifest, opts.snapshotId);
      return r;
    };
    let first: Reading | undefined;
    if (prev?.imageId && surely !== true) {
      first = await read();
      if (first.complete && manifestDigest(first.manifest) === manifestDigest(prev.manifest) && !(await this.outside(t, ws, first.root, prev, opts.signal))) {
        return this.reuse(t.containerId, { ...prev, now: first.now, listedAt: first.startedAt }, first.stats, opts.snapshotId);
      }
    }
    const maxBytes = this.d.deltaMaxBytes ?? DELTA_MAX_BYTES;
    if (dirs && prev?.base && maxBytes > 0 && this.images.supported) {
      // A small change: a layer built here from what the scan found, with no engine commit.
      const base = prev.base;
      const delta = async (reading: Reading) => {
        const taken = reading.complete && reading.layer ? await takeDelta({ engine: this.d.engine, store: this.d.store, logger: this.d.logger, images: this.images }, { containerId: t.containerId, dirs, ws, base, first: reading.layer, maxBytes, budget: this.budget(t, opts.signal), maxLayers: this.d.flattenDepth ?? FLATTEN_DEPTH, ...opts }) : undefined;
        if (taken && !('writer' in taken)) this.known.set(t.containerId, { stats: new Map(), manifest: taken.manifest, imageId: taken.imageId, markAt: reading.startedAt, listedAt: reading.startedAt, base: { imageId: taken.imageId, manifest: taken.manifest, markAt: reading.startedAt } });
        return taken;
      };
      first ??= await read();
      let taken = await delta(first);
      if (taken && 'writer' in taken) {
        // A command is still writing: the container frozen, where nothing can move under the
        // host's reading, the workspace is read once more and taken as a delta, or committed while
        // still frozen (one engine commit instead of two and a retake read through the engine).
        this.d.logger.info({ snapshotId: opts.snapshotId }, 'workspace changed while the snapshot was read; reading it again with the container paused');
        const frozen = await this.frozen(t, async () => {
          const again = await read();
          const d = await delta(again);
          return d && !('writer' in d) ? d : { again, image: await commit(true), manifest: await this.frozenManifest(t, again, opts.signal) };
        });
        if ('again' in frozen) return this.settle(t, opts, frozen.image, frozen.manifest, this.frozenKnown(frozen.again), frozen.again.hashed);
        return frozen;
      }
      if (taken) return taken;
    }
    let image: EngineImage;
    // The image holds at least the container's state at `commitAt`; what changes in the layer after
    // it is new for the next snapshot.
    let commitAt: number;
    if (first) {
      // Taken after the reading, so that a step's last writes are not within the file clock's margin of it.
      commitAt = Date.now();
      image = await commit(false);
    } else {
      // No previous image to stand for this state, or the layer shows a change: the reading and the
      // commit run side by side (the check after the commit catches any write in between).
      commitAt = markAt;
      // Both settle before either failure is thrown: a reading refused mid-commit must not leave the
      // commit to tag an image after the failed attempt removed its tag.
      const [r, c] = await Promise.allSettled([read(), commit(false)]);
      if (r.status === 'rejected') {
        if (c.status === 'fulfilled') await this.d.engine.discardImage(c.value.imageId).catch(() => {});
        throw r.reason;
      }
      if (c.status === 'rejected') throw c.reason;
      [first, image] = [r.value, c.value];
    }
    let manifest = first.manifest;
    // Still what the first reading found: a second walk of the layer (same stat fields, same hashes
    // of recently changed files), or a second listing compared field by field.
    const moved = first.layer && first.complete ? await timed(this.d.logger, 'snapshot.layer_verify', () => layerChangedPath(dirs!, ws, first.layer!, this.budget(t, opts.signal))) : null;
    const unchanged = first.layer
      ? first.complete && moved === null
      : sameListing(first as Listing, await this.list(t, { stats: first.stats, manifest: first.manifest, now: first.now }, 'promote', opts.signal)) && first.complete;
    if (!unchanged) {
      if (first.complete) this.d.logger.warn({ snapshotId: opts.snapshotId, ...(moved ? { path: moved } : {}) }, 'workspace changed during the snapshot; taking it again with the container paused');
      else this.d.logger.info({ snapshotId: opts.snapshotId }, 'the workspace owner cannot read all of the workspace; taking the snapshot paused, read through the engine');
      const superseded = image;
      if (dirs) {
        // Read on the host with the container frozen: exact, and the next snapshot can build on it.
        const frozen = await this.frozen(t, async () => {
          const again = await read();
          return { again, image: await commit(true), manifest: await this.frozenManifest(t, again, opts.signal) };
        });
        await this.d.engine.discardImage(superseded.imageId).catch((err: unknown) => this.d.logger.warn({ err, imageId: superseded.imageId }, 'could not remove a superseded snapshot image'));
        return this.settle(t, opts, frozen.image, frozen.manifest, this.frozenKnown(frozen.again), frozen.again.hashed);
      }
      ({ image, manifest } = await this.takePaused(t, first.root, opts, commit));
      // The second commit took the tag; the first would linger as an unnamed image.
      await this.d.engine.discardImage(superseded.imageId).catch((err: unknown) => this.d.logger.warn({ err, imageId: superseded.imageId }, 'could not remove a superseded snapshot image'));
    }
    // A paused retake read the workspace through the engine and has no stat fields: the next snapshot hashes everything again.
    const known = unchanged ? { stats: first.stats, now: first.now, markAt: commitAt, listedAt: first.layer ? first.startedAt : commitAt } : undefined;
    return this.settle(t, opts, image, manifest, known, first.hashed, dirs ? 'layer' : 'exec');
  }

  /** Flattens a deep image, writes its manifest and remembers (or forgets) what this process knows of the container. */
  private async settle(t: SnapshotTarget, opts: TakeOptions, image: EngineImage, manifest: WorkspaceManifest, known: (Pick<Known, 'stats' | 'now' | 'listedAt'> & { markAt: number }) | undefined, hashed: number, scan: 'layer' | 'exec' = 'layer'): Promise<TakenSnapshot> {
    const flattened = image.depth >= (this.d.flattenDepth ?? FLATTEN_DEPTH);
    if (flattened) {
      const deep = image;
      image = await this.d.engine.flatten(deep.imageId, { tag: opts.snapshotId, labels: opts.labels, signal: opts.signal });
      this.d.logger.info({ snapshotId: opts.snapshotId, deepImageId: deep.imageId, depth: deep.depth, imageId: image.imageId }, 'snapshot image flattened to one layer');
    }
    await timed(this.d.logger, 'snapshot.manifest_write', () => this.d.store.putWorkspaceManifest(image.imageId, manifest as Json));
    if (known) this.known.set(t.containerId, { ...known, manifest, imageId: image.imageId, base: { imageId: image.imageId, manifest, markAt: known.markAt } });
    else this.known.delete(t.containerId);
    this.d.logger.debug({ snapshotId: opts.snapshotId, imageId: image.imageId, hashed, layerBytes: image.layerBytes, scan }, 'snapshot taken');
    return { imageId: image.imageId, workspaceDigest: manifestDigest(manifest), layerBytes: image.layerBytes, layers: image.layers, flattened, reused: false, manifest, scan, hashed };
  }

  /** What a reading of a frozen container tells the next snapshot: exact as of before it started. */
  private frozenKnown(r: Reading): (Pick<Known, 'stats' | 'now' | 'listedAt'> & { markAt: number }) | undefined {
    return r.complete ? { stats: r.stats, now: r.now, markAt: r.startedAt, listedAt: r.startedAt } : undefined;
  }

  /** The manifest of a frozen container: the host's reading when it saw everything, else read through the engine. */
  private async frozenManifest(t: SnapshotTarget, r: Reading, signal?: AbortSignal): Promise<WorkspaceManifest> {
    return r.complete ? r.manifest : this.readThroughEngine(t, r.root, signal);
  }

  /** Runs `fn` with the container paused by this process; unpaused on every path. */
  private async frozen<T>(t: SnapshotTarget, fn: () => Promise<T>): Promise<T> {
    // The freezer can fail to freeze a busy container in its time ("unable to freeze"): tried again.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.d.engine.setPaused(t.containerId, true);
        break;
      } catch (err) {
        if (!(err instanceof BerthError) || !err.retryable || attempt >= ATTEMPTS) throw err;
        this.d.logger.info({ err, containerId: t.containerId, attempt }, 'the container could not be paused; trying again');
        await new Promise((r) => setTimeout(r, 100 * attempt));
      }
    }
    try {
      return await fn();
    } finally {
      await this.d.engine.setPaused(t.containerId, false);
    }
  }

  /** Pause, commit, read the workspace through the engine, unpause: the manifest is exactly the image's. */
  private async takePaused(t: SnapshotTarget, root: string, opts: { snapshotId: string; signal?: AbortSignal }, commit: (pause: boolean) => Promise<EngineImage>) {
    let lastError: unknown;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      await this.d.engine.setPaused(t.containerId, true);
      try {
        const image = await commit(true);
        const manifest = await this.readThroughEngine(t, root, opts.signal);
        return { image, manifest };
      } catch (err) {
        lastError = err;
        if (!(err instanceof BerthError) || !err.retryable) throw err;
      } finally {
        await this.d.engine.setPaused(t.containerId, false);
      }
    }
    throw lastError;
  }
}
