import { assertWorkspaceVisible } from './workspace-mounts';
import type Dockerode from 'dockerode';
import { BerthError } from '../errors';
import { engineError, isNotFound } from './engine-errors';

/**
 * The image id (`sha256:...`) of a local image reference, for `berth env lock`. Never pulls:
 * an image that is not on this engine is `image_missing`.
 */
export async function resolveImageDigest(docker: Dockerode, ref: string): Promise<string> {
  try {
    const info = await docker.getImage(ref).inspect();
    return info.Id;
  } catch (err) {
    if (err instanceof BerthError) throw err;
    if (isNotFound(err)) {
      throw new BerthError('image_missing', `image "${ref}" is not on this Docker engine (build it locally; nothing is pulled)`, { details: { imageRef: ref } });
    }
    throw engineError(`inspect image ${ref}`, err);
  }
}

/** Refuses, with `image_missing`, a pinned id that no local image has. */
export async function assertImagePresent(docker: Dockerode, digest: string, ref: string, workspace?: string): Promise<void> {
  let id: string;
  try {
    const info = await docker.getImage(digest).inspect();
    id = info.Id;
    if (workspace !== undefined) assertWorkspaceVisible(workspace, Object.keys(info.Config?.Volumes ?? {}), `image ${ref}`);
  } catch (err) {
    if (isNotFound(err)) {
      throw new BerthError('image_missing', `no image with id ${digest} (${ref}) on this Docker engine`, { details: { imageRef: ref, imageDigest: digest } });
    }
    throw engineError(`inspect image ${digest}`, err);
  }
  // A full id resolves only to itself, but say so if the engine ever answers otherwise.
  if (id !== digest) throw new BerthError('image_missing', `image id ${digest} resolved to ${id}`, { details: { imageRef: ref, imageDigest: digest } });
}
