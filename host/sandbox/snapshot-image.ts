import { lstat, readdir } from 'node:fs/promises';
import { ConfinedTree, nameString } from '../snapshot/confined';
import type Dockerode from 'dockerode';
import { BerthError } from '../errors';
import { engineError, isConflict, isNotFound } from './engine-errors';
import { releaseHeld, takeHeld, underPause } from './exec-gate';
import { LABEL } from './labels';
import { faultAside } from '../support/faults';
import { loadLayerImage, rawImageConfig } from './image-load';

/** The repository snapshot images are tagged into, so that `docker image prune` never takes them as dangling. */
export const SNAPSHOT_REPO = 'berth-snapshot';
/** The label every image berth commits or loads for a snapshot carries (its record id). */
const SNAPSHOT_LABEL = 'berth.snapshot';

export interface CommittedImage {
  imageId: string;
  /** Bytes of the layer this commit added (what changed since the container's image). */
  layerBytes: number;
  /** Layers in the new image, parents included. */
  layers: number;
  /**
   * Length of the image's parent chain (its history). The engine refuses to commit on top of an
   * image 125 deep ("max depth exceeded"), so a run that keeps re-basing must flatten before.
   */
  depth: number;
}

/**
 * `docker commit` of a container into `berth-snapshot:<tag>`, paused during the copy unless the
 * caller knows nothing writes. Labels are set on the image for the sweeper and for operators.
 */
export async function commitContainer(
  docker: Dockerode,
  containerId: string,
  opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal; pause?: boolean },
): Promise<CommittedImage> {
  opts.signal?.throwIfAborted();
  let id: string;
  const commit = async (pause: boolean) => ((await docker.getContainer(containerId).commit({ repo: SNAPSHOT_REPO, tag: opts.tag, pause, Labels: opts.labels })) as { Id: string }).Id;
  // The engine's paused commit freezes the container: no exec of this process may be in setup then (see exec-gate.ts).
  const once = (pause: boolean) => (pause ? underPause(containerId, () => commit(true)) : commit(false));
  try {
    try {
      id = await once(opts.pause ?? true);
    } catch (err) {
      // A writer that swaps directories while the engine copies the layer unpaused makes a tar the
      // engine itself cannot apply (seen: a RENAME_EXCHANGE racer). The engine's own paused commit
      // copies a still layer, and the engine unpauses the container when it ends, on every path.
      if (opts.pause === false && /Error processing tar file/.test((err as Error).message ?? '')) id = await once(true);
      else throw err;
    }
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('container_missing', `cannot snapshot: container ${containerId.slice(0, 12)} is gone`, { ids: { containerId } });
    throw engineError(`commit container ${containerId.slice(0, 12)}`, err, { containerId });
  }
  const image = docker.getImage(id);
  const [info, history] = await Promise.all([image.inspect(), image.history() as Promise<Array<{ Size: number }>>]);
  return { imageId: info.Id, layerBytes: history[0]?.Size ?? 0, layers: info.RootFS?.Layers?.length ?? history.length, depth: history.length };
}

type ImageConfig = { Env?: string[] | null; WorkingDir?: string; User?: string; Entrypoint?: string[] | null; Cmd?: string[] | null; Labels?: Record<string, string> | null };

/** The image config as `docker import --change` lines; JSON strings are valid Dockerfile quoting. */
function configChanges(c: ImageConfig, labels: Record<string, string>): string[] {
  const out: string[] = [];
  for (const e of c.Env ?? []) {
    const i = e.indexOf('=');
    out.push(`ENV ${e.slice(0, i)}=${JSON.stringify(e.slice(i + 1))}`);
  }
  if (c.WorkingDir) out.push(`WORKDIR ${c.WorkingDir}`);
  if (c.User) out.push(`USER ${c.User}`);
  if (c.Entrypoint?.length) out.push(`ENTRYPOINT ${JSON.stringify(c.Entrypoint)}`);
  if (c.Cmd?.length) out.push(`CMD ${JSON.stringify(c.Cmd)}`);
  for (const [k, v] of Object.entries({ ...(c.Labels ?? {}), ...labels })) out.push(`LABEL ${JSON.stringify(k)}=${JSON.stringify(v)}`);
  return out;
}

/**
 * Rewrites a snapshot image as one layer with the same files and config (`docker export` of a
 * container made from it, then `docker import`), tagged `berth-snapshot:<tag>` in its place; the
 * deep image is removed. The helper container is never started and carries the host's labels, so
 * a crash leaves it for the sweeper.
 */
export async function flattenImage(
  docker: Dockerode,
  imageId: string,
  opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal },
): Promise<CommittedImage> {
  opts.signal?.throwIfAborted();
  const source = (await docker.getImage(imageId).inspect()) as { Config?: ImageConfig };
  let helper: Dockerode.Container | undefined;
  try {
    helper = await docker.createContainer({ Image: imageId, Entrypoint: ['/nonexistent'], Cmd: [], Labels: { [LABEL.managed]: '1', [LABEL.host]: opts.labels[LABEL.host] ?? '' }, NetworkDisabled: true, HostConfig: { NetworkMode: 'none' } });
    const tar = (await helper.export({ abortSignal: opts.signal })) as NodeJS.ReadableStream;
    const progress = (await docker.importImage(tar, { repo: SNAPSHOT_REPO, tag: opts.tag, changes: configChanges(source.Config ?? {}, opts.labels), abortSignal: opts.signal } as object)) as NodeJS.ReadableStream;
    await new Promise<void>((resolve, reject) => docker.modem.followProgress(progress, (err: Error | null) => (err ? reject(err) : resolve())));
  } catch (err) {
    throw engineError(`flatten image ${imageId.slice(7, 19)}`, err);
  } finally {
    await helper?.remove({ force: true }).catch(() => {});
  }
  const flat = docker.getImage(`${SNAPSHOT_REPO}:${opts.tag}`);
  const [info, history] = await Promise.all([flat.inspect(), flat.history() as Promise<Array<{ Size: number }>>]);
  // The deep image lost its tag to the flat one; nothing is built on it, so it can go now.
  if (info.Id !== imageId) await discardImage(docker, imageId);
  return { imageId: info.Id, layerBytes: history[0]?.Size ?? 0, layers: info.RootFS?.Layers?.length ?? 1, depth: history.length };
}

/** One path of `docker diff`: the container's changes against its image. */
export interface Change {
  path: string;
  kind: 'modified' | 'added' | 'deleted';
}

const KINDS = ['modified', 'added', 'deleted'] as const;

/** The container's filesystem changes against its image (cheap: the engine reads only the upper layer). */
export function containerChanges(docker: Dockerode, containerId: string): Promise<Change[]> {
  return changesOf(docker.getContainer(containerId), containerId);
}

/** {@link containerChanges} of a container handle a lease already holds. */
export async function changesOf(container: Dockerode.Container, containerId: string): Promise<Change[]> {
  try {
    // With no changes the engine answers `null`, which dockerode hands back as a raw buffer.
    const raw: unknown = await container.changes();
    const changes = (Array.isArray(raw) ? raw : []) as Array<{ Path: string; Kind: number }>;
    return changes.map((c) => ({ path: c.Path, kind: KINDS[c.Kind] ?? 'modified' }));
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('container_missing', `container ${containerId.slice(0, 12)} is gone`, { ids: { containerId } });
    throw engineError(`diff container ${containerId.slice(0, 12)}`, err, { containerId });
  }
}

export async function imageExists(docker: Dockerode, imageId: string): Promise<boolean> {
  try {
    await docker.getImage(imageId).inspect();
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw engineError(`inspect image ${imageId}`, err);
  }
}

/**
 * Whether the image has a name of its own besides snapshot tags (an environment's `ref`): removing
 * every snapshot tag then leaves it on the engine. An image with no such name would go with the
 * last snapshot tag that retention removes.
 */
export async function imageNamedElsewhere(docker: Dockerode, imageId: string): Promise<boolean> {
  try {
    const info = await docker.getImage(imageId).inspect();
    return (info.RepoTags ?? []).some((t) => !t.startsWith(`${SNAPSHOT_REPO}:`) && t !== '<none>:<none>');
  } catch (err) {
    if (isNotFound(err)) return false;
    throw engineError(`inspect image ${imageId}`, err);
  }
}

/**
 * Removes a snapshot's tag, and the image with it when nothing else needs it. An image that later
 * snapshots are built on stays as their parent layer (the engine refuses to delete it); it is then
 * only untagged, which frees its space once its children go.
 */
export async function removeSnapshotImage(docker: Dockerode, tag: string): Promise<'removed' | 'untagged' | 'absent'> {
  const plain = `${SNAPSHOT_REPO}:${tag}`;
  try {
    // Its twins naming a store (an environment image's tag; see tagSnapshotImage) go after the
    // plain tag, each by its own name: a host killed in between leaves a twin, which names its
    // store and is found again by `berth gc`; the plain tag left alone would name no store, and
    // nothing would ever find it. The plain tag already gone (a kill after it, or at the tag's
    // making, which puts the twin first): the twins are looked up by name.
    const names = await docker.getImage(plain).inspect().then(
      (i) => i.RepoTags ?? [],
      async () => (await docker.listImages({ filters: JSON.stringify({ reference: [`${SNAPSHOT_REPO}/*:${tag}`] }) })).flatMap((i) => i.RepoTags ?? []),
    );
    const twins = names.filter((n) => parseStoreTag(n)?.snapshotId === tag);
    let outcome: 'removed' | 'untagged' | 'absent' = 'absent';
    for (const name of [plain, ...twins]) {
      if (name !== plain) faultAside('snapshot:plain-untagged');
      const out = await docker.getImage(name).remove().then(
        (o) => o as Array<{ Deleted?: string; Untagged?: string }>,
        (err: unknown) => {
          if (isNotFound(err)) return undefined;
          if (isConflict(err)) return [] as Array<{ Deleted?: string }>;
          throw err;
        },
      );
      if (out === undefined) continue;
      if (out.some((o) => o.Deleted)) outcome = 'removed';
      else if (outcome === 'absent') outcome = 'untagged';
    }
    return outcome;
  } catch (err) {
    throw engineError(`remove snapshot image ${tag}`, err);
  }
}

/** Removes an image that lost its tag (a superseded commit); one still in use stays, untagged and unnamed. */
export async function discardImage(docker: Dockerode, imageId: string): Promise<void> {
  try {
    await docker.getImage(imageId).remove();
  } catch (err) {
    if (!isNotFound(err) && !isConflict(err)) throw engineError(`remove image ${imageId.slice(7, 19)}`, err);
  }
}

/** Pauses (`true`) or unpauses a container; the engine freezes every process in it. */
export async function setPaused(docker: Dockerode, containerId: string, paused: boolean): Promise<void> {
  // No exec of this process may be in setup while the container freezes (see exec-gate.ts).
  if (paused) await takeHeld(containerId);
  try {
    await pauseOrUnpause(docker, containerId, paused);
  } catch (err) {
    if (paused) releaseHeld(containerId);
    throw err;
  }
  if (!paused) releaseHeld(containerId);
}

async function pauseOrUnpause(docker: Dockerode, containerId: string, paused: boolean): Promise<void> {
  const c = docker.getContainer(containerId);
  try {
    await (paused ? c.pause() : c.unpause());
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('container_missing', `container ${containerId.slice(0, 12)} is gone`, { ids: { containerId } });
    // Already in the asked state.
    const state = isConflict(err) || (err as { statusCode?: number }).statusCode === 500 ? await c.inspect().then((i) => i.State, () => undefined) : undefined;
    if (state?.Paused === paused) return;
    throw engineError(`${paused ? 'pause' : 'unpause'} container ${containerId.slice(0, 12)}`, err, { containerId });
  }
}

/** A tar stream of a path in the container, read by the engine (works on a paused container). */
export async function archivePath(docker: Dockerode, containerId: string, path: string): Promise<NodeJS.ReadableStream> {
  try {
    return (await docker.getContainer(containerId).getArchive({ path })) as NodeJS.ReadableStream;
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('container_missing', `cannot read ${path}: container ${containerId.slice(0, 12)} or the path is gone`, { ids: { containerId } });
    throw engineError(`archive ${path} of ${containerId.slice(0, 12)}`, err, { containerId });
  }
}

/**
 * The repository of the twin tag `berth-snapshot/<store id>:<snapshot id>` that names the store of
 * a snapshot tag put on an image that does not carry that store's labels (an environment's image:
 * a fresh sandbox's first snapshot, and unchanged snapshots after it); undefined for an id that is
 * not a valid repository path component (ids berth makes always are: `store_<hex>`).
 */
export function storeTagRepo(storeId: string): string | undefined {
  return /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/.test(storeId) ? `${SNAPSHOT_REPO}/${storeId}` : undefined;
}

/** A twin tag's store and snapshot ids (see {@link storeTagRepo}); undefined for any other name. */
export function parseStoreTag(name: string): { storeId: string; snapshotId: string } | undefined {
  const m = /^berth-snapshot\/([a-z0-9._-]+):([\w][\w.-]*)$/.exec(name);
  return m ? { storeId: m[1]!, snapshotId: m[2]! } : undefined;
}

/**
 * Adds the tag `berth-snapshot:<tag>` to an existing image (a second record that shares it, a
 * fresh sandbox's environment image). With `storeId`, an image that is not a snapshot image of
 * berth's (no `berth.snapshot` label: an environment's image, whose labels name no store) also
 * gets the twin tag `berth-snapshot/<store>:<tag>`, put first: labels are part of the image id and
 * cannot be added, and without the twin nothing on the engine tells which store the tag is of
 * once that store's file is deleted (`berth gc --orphans` finds tags by it).
 */
export async function tagSnapshotImage(docker: Dockerode, imageId: string, tag: string, o: { storeId?: string } = {}): Promise<void> {
  try {
    const image = docker.getImage(imageId);
    const repo = o.storeId ? storeTagRepo(o.storeId) : undefined;
    if (repo && (await image.inspect()).Config?.Labels?.[SNAPSHOT_LABEL] === undefined) {
      await image.tag({ repo, tag });
      faultAside('snapshot:twin-tagged');
    }
    await image.tag({ repo: SNAPSHOT_REPO, tag });
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('image_missing', `snapshot image ${imageId.slice(7, 19)} is gone`, { details: { imageId } });
    throw engineError(`tag image ${imageId.slice(7, 19)}`, err);
  }
}

/** A container's overlay directories on this machine (see {@link layerDirs}). */
export interface LayerDirs {
  upper: string;
  merged: string;
}

// A container's layer directories never change while it lives: one inspect per container, not per
// snapshot (each engine round trip costs 10-200 ms under load). Bounded; an evicted entry is inspected again.
const dirsCache = new Map<string, LayerDirs | null>();

/**
 * The container's overlay2 upper directory (its writable layer) and merged directory (its whole
 * filesystem as it sees it), when this process can read them: the engine is local, uses overlay2,
 * and this process runs as root in its mount namespace. `undefined` otherwise (a remote or
 * rootless engine, another storage driver): callers then look inside the container instead.
 */
export async function layerDirs(docker: Dockerode, containerId: string): Promise<LayerDirs | undefined> {
  const cached = dirsCache.get(containerId);
  if (cached !== undefined) return cached ?? undefined;
  let found: LayerDirs | null = null;
  try {
    const gd = ((await docker.getContainer(containerId).inspect()) as { GraphDriver?: { Name?: string; Data?: Record<string, string> | null } }).GraphDriver;
    const upper = gd?.Data?.UpperDir;
    const merged = gd?.Data?.MergedDir;
    if (gd?.Name === 'overlay2' && upper && merged && (await lstat(upper)).isDirectory() && (await readdir(merged)).length > 0) found = { upper, merged };
  } catch {
    // Gone, not readable here, or not mounted (a stopped container): not cached, it may start again.
    return undefined;
  }
  if (dirsCache.size >= 512) dirsCache.delete(dirsCache.keys().next().value!);
  dirsCache.set(containerId, found);
  return found ?? undefined;
}

/**
 * Whether anything in the container's writable layer outside `skip` (absolute container paths)
 * changed at or after `sinceMs` (ctime: creation, rewrite, chmod; a deletion leaves a whiteout and
 * touches its directory). Reads the layer's upper directory on this machine, so it costs what the
 * container changed, not what the image holds (`docker diff` walks the whole image here).
 * `undefined` when that directory cannot be read (a remote or rootless engine, another driver):
 * the caller must find out another way.
 */
export async function changedOutsideSince(docker: Dockerode, containerId: string, sinceMs: number, skip: string[]): Promise<boolean | undefined> {
  const upper = (await layerDirs(docker, containerId))?.upper;
  if (!upper) return undefined;
  const skipped = new Set(skip.map((p) => `.${p.replace(/\/+$/, '')}`));
  // File times come from the kernel's coarse clock (one tick, up to 10 ms, behind the host's own
  // reading): a margin makes a write just after `sinceMs` count, at the price of counting one just before.
  const since = Math.floor(sinceMs) - 25;
  // The container writes this directory: it is walked by descriptors, never by host paths (a
  // directory swapped for a symlink to the host's root is a symlink here, not followed).
  const tree = ConfinedTree.at(upper, '');
  if (!tree) return undefined;
  try {
    const stack = ['.'];
    let calls = 0;
    while (stack.length) {
      const dir = stack.pop()!;
      const names = tree.children(dir);
      if (!names) return true;
      for (const n of names) {
        const path = `${dir}/${nameString(n)}`;
        if (skipped.has(path)) continue;
        const st = tree.lstat(path);
        if (!st || Number(st.ctimeMs) >= since || Number(st.mtimeMs) >= since) return true;
        if (st.isDirectory()) stack.push(path);
        if (++calls % 500 === 0) await new Promise<void>((r) => setImmediate(r));
      }
    }
    return false;
  } catch {
    return undefined;
  } finally {
    tree.close();
  }
}

/** A snapshot image on the engine, as gc looks at it. */
export interface SnapshotImageInfo {
  imageId: string;
  /** The record ids its `berth-snapshot:<id>` tags name. */
  tags: string[];
  labels: Record<string, string>;
  createdAt: number;
}

/**
 * Every image on this engine labelled as a snapshot (`berth.snapshot`), whichever host made it:
 * an image pulled from a registry keeps the labels of the engine that committed it (labels are part
 * of the image id, which a pull verifies), so `berth.host` names that host, not this one. Which
 * store owns an image is decided by its `berth.store` and `berth.session` labels (host/snapshot).
 */
export async function listSnapshotImages(docker: Dockerode, o: { runId?: string } = {}): Promise<SnapshotImageInfo[]> {
  const label = ['berth.snapshot', ...(o.runId ? [`berth.run=${o.runId}`] : [])];
  const images = await docker.listImages({ filters: { label } }).catch((err: unknown) => {
    throw engineError('list snapshot images', err);
  });
  return images.map((i) => ({
    imageId: i.Id,
    tags: (i.RepoTags ?? []).filter((t) => t.startsWith(`${SNAPSHOT_REPO}:`)).map((t) => t.slice(SNAPSHOT_REPO.length + 1)),
    labels: i.Labels ?? {},
    createdAt: i.Created * 1000,
  }));
}

/** A twin tag on the engine (see {@link tagSnapshotImage}): the store and snapshot it names, and its image. */
export interface StoreTagInfo {
  storeId: string;
  snapshotId: string;
  imageId: string;
  /** Every name the image has (its environment's own among them). */
  names: string[];
}

/**
 * Every twin tag `berth-snapshot/<store>:<snapshot>` on this engine: snapshot tags on images whose
 * labels name no store (an environment's image), which {@link listSnapshotImages} never lists.
 */
export async function listStoreTags(docker: Dockerode): Promise<StoreTagInfo[]> {
  const images = await docker.listImages().catch((err: unknown) => {
    throw engineError('list images', err);
  });
  return images.flatMap((i) => (i.RepoTags ?? []).flatMap((name) => {
    const t = parseStoreTag(name);
    return t ? [{ ...t, imageId: i.Id, names: i.RepoTags ?? [] }] : [];
  }));
}

/** Bytes of the image's own layer (what removing it frees once no other image uses it). */
export async function imageLayerBytes(docker: Dockerode, imageId: string): Promise<number> {
  const history = (await docker.getImage(imageId).history().catch(() => [])) as Array<{ Size: number }>;
  return history[0]?.Size ?? 0;
}

/** The engine calls snapshots need, bound to one Docker client (so callers never import dockerode). */
export function snapshotEngine(docker: Dockerode) {
  return {
    commit: (containerId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal; pause?: boolean }) => commitContainer(docker, containerId, opts),
    flatten: (imageId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal }) => flattenImage(docker, imageId, opts),
    changes: (containerId: string) => containerChanges(docker, containerId),
    imageExists: (imageId: string) => imageExists(docker, imageId),
    imageNamedElsewhere: (imageId: string) => imageNamedElsewhere(docker, imageId),
    removeSnapshot: (tag: string) => removeSnapshotImage(docker, tag),
    discardImage: (imageId: string) => discardImage(docker, imageId),
    setPaused: (containerId: string, paused: boolean) => setPaused(docker, containerId, paused),
    archive: (containerId: string, path: string) => archivePath(docker, containerId, path),
    tag: (imageId: string, tag: string, o?: { storeId?: string }) => tagSnapshotImage(docker, imageId, tag, o),
    listSnapshotImages: (o?: { runId?: string }) => listSnapshotImages(docker, o),
    listStoreTags: () => listStoreTags(docker),
    imageLayerBytes: (imageId: string) => imageLayerBytes(docker, imageId),
    changedOutsideSince: (containerId: string, sinceMs: number, skip: string[]) => changedOutsideSince(docker, containerId, sinceMs, skip),
    layerDirs: (containerId: string) => layerDirs(docker, containerId),
    imageConfig: (imageId: string) => rawImageConfig(docker, imageId),
    loadLayer: (o: { config: Buffer; layer: Buffer; tags: string[]; signal?: AbortSignal }) => loadLayerImage(docker, o),
  };
}
export type SnapshotEngineCalls = ReturnType<typeof snapshotEngine>;
