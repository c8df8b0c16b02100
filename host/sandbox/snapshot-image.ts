import type Dockerode from 'dockerode';
import { BerthError } from '../errors';
import { engineError, isConflict, isNotFound } from './engine-errors';

/** The repository snapshot images are tagged into, so that `docker image prune` never takes them as dangling. */
export const SNAPSHOT_REPO = 'berth-snapshot';

export interface CommittedImage {
  imageId: string;
  /** Bytes of the layer this commit added (what changed since the container's image). */
  layerBytes: number;
  /** Layers in the new image, parents included. */
  layers: number;
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
  try {
    const res = (await docker.getContainer(containerId).commit({ repo: SNAPSHOT_REPO, tag: opts.tag, pause: opts.pause ?? true, Labels: opts.labels })) as { Id: string };
    id = res.Id;
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('container_missing', `cannot snapshot: container ${containerId.slice(0, 12)} is gone`, { ids: { containerId } });
    throw engineError(`commit container ${containerId.slice(0, 12)}`, err, { containerId });
  }
  const image = docker.getImage(id);
  const [info, history] = await Promise.all([image.inspect(), image.history() as Promise<Array<{ Size: number }>>]);
  return { imageId: info.Id, layerBytes: history[0]?.Size ?? 0, layers: info.RootFS?.Layers?.length ?? history.length };
}

/** One path of `docker diff`: the container's changes against its image. */
export interface Change {
  path: string;
  kind: 'modified' | 'added' | 'deleted';
}

const KINDS = ['modified', 'added', 'deleted'] as const;

/** The container's filesystem changes against its image (cheap: the engine reads only the upper layer). */
export async function containerChanges(docker: Dockerode, containerId: string): Promise<Change[]> {
  try {
    // With no changes the engine answers `null`, which dockerode hands back as a raw buffer.
    const raw: unknown = await docker.getContainer(containerId).changes();
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
 * Removes a snapshot's tag, and the image with it when nothing else needs it. An image that later
 * snapshots are built on stays as their parent layer (the engine refuses to delete it); it is then
 * only untagged, which frees its space once its children go.
 */
export async function removeSnapshotImage(docker: Dockerode, tag: string): Promise<'removed' | 'untagged' | 'absent'> {
  try {
    const out = (await docker.getImage(`${SNAPSHOT_REPO}:${tag}`).remove()) as Array<{ Deleted?: string; Untagged?: string }>;
    return out.some((o) => o.Deleted) ? 'removed' : 'untagged';
  } catch (err) {
    if (isNotFound(err)) return 'absent';
    if (isConflict(err)) return 'untagged';
    throw engineError(`remove snapshot image ${tag}`, err);
  }
}

/** The engine calls snapshots need, bound to one Docker client (so callers never import dockerode). */
export function snapshotEngine(docker: Dockerode) {
  return {
    commit: (containerId: string, opts: { tag: string; labels: Record<string, string>; signal?: AbortSignal; pause?: boolean }) => commitContainer(docker, containerId, opts),
    changes: (containerId: string) => containerChanges(docker, containerId),
    imageExists: (imageId: string) => imageExists(docker, imageId),
    removeSnapshot: (tag: string) => removeSnapshotImage(docker, tag),
  };
}
export type SnapshotEngineCalls = ReturnType<typeof snapshotEngine>;
