import { chmod, mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BerthError } from '../host/errors';
import type { BuildProgress, ImageDefinition } from './definition';
import { definitionHash } from './definition-hash';
import { getDefinition } from './definitions';
import { imageConfigJson, writeDockerArchiveDir } from './docker-archive';
import { findImageByLabels, loadArchiveDir, tagImage } from './engine';
import { sha256File, writeLayerTar } from './layer-tar';
import { removeTree } from './remove-tree';

export interface BuildImageOptions {
  signal: AbortSignal;
  /** Build and load even when an image with this definition hash is already on the engine. */
  force?: boolean;
  onProgress?: (event: BuildProgress) => void;
}

export interface BuiltImage {
  name: string;
  /** `sha256:` of the image config; what a manifest pins as `image.digest`. */
  imageId: string;
  tags: string[];
  reused: boolean;
  durationMs: number;
}

/**
 * Makes `berth/<name>:latest` and `berth/<name>:<hash12>` point at the image of the current
 * definition: reuses an image on the engine labelled with the same definition hash, otherwise
 * builds the rootfs, a deterministic layer and a docker-archive with a fixed config, and loads
 * it. The same definition yields the same image id on every machine of the same architecture.
 */
export async function buildImage(name: string, opts: BuildImageOptions): Promise<BuiltImage> {
  const started = performance.now();
  const def = getDefinition(name);
  let step: BuildProgress['step'] = 'hash';
  const report = (s: BuildProgress['step'], message: string): void => {
    step = s;
    opts.onProgress?.({ name, step: s, message });
  };
  try {
    const hash = await definitionHash(def, opts.signal);
    report('hash', `definition ${hash}`);
    const tags = [`berth/${name}:latest`, `berth/${name}:${hash.slice(0, 12)}`];
    let imageId = opts.force ? undefined : await findImageByLabels({ 'berth.image.name': name, 'berth.image.definition': hash }, opts.signal);
    const reused = imageId !== undefined;
    if (imageId !== undefined) report('reuse', `reused ${imageId}`);
    else imageId = await buildAndLoad(def, hash, opts.signal, report);
    report('tag', tags.join(' '));
    for (const tag of tags) await tagImage(imageId, tag, opts.signal);
    const durationMs = Math.round(performance.now() - started);
    report('done', `${imageId} ${reused ? 'reused' : 'built'} in ${durationMs} ms`);
    return { name, imageId, tags, reused, durationMs };
  } catch (err) {
    if (opts.signal.aborted) {
      throw new BerthError('image_build_cancelled', `building image ${name} was cancelled during ${step}`, { retryable: true, details: { name, step }, cause: err });
    }
    if (err instanceof BerthError) throw err;
    const stderr = (err as { stderr?: unknown }).stderr;
    throw new BerthError('image_build_failed', `building image ${name} failed during ${step}: ${(err as Error).message}`, {
      details: { name, step, stderr: typeof stderr === 'string' ? stderr.slice(-4000) : undefined },
      cause: err,
    });
  }
}

async function buildAndLoad(
  def: ImageDefinition,
  hash: string,
  signal: AbortSignal,
  report: (step: BuildProgress['step'], message: string) => void,
): Promise<string> {
  const work = await mkdtemp(join(tmpdir(), `berth-image-${def.name}-`));
  try {
    const rootfs = join(work, 'rootfs');
    await mkdir(rootfs);
    // mkdtemp's 0700 would become the mode of / in the image, locking out the berth user.
    await chmod(rootfs, 0o755);
    report('rootfs', `building rootfs in ${rootfs}`);
    await def.buildRootfs(rootfs, { signal, progress: (message) => report('rootfs', message) });
    const layer = join(work, 'layer.tar');
    report('layer', 'writing layer tar');
    await writeLayerTar(rootfs, layer, def.mtime, signal);
    const diffId = await sha256File(layer);
    report('archive', `layer ${diffId}`);
    const configJson = imageConfigJson({ name: def.name, definitionHash: hash, cmd: def.cmd, diffId });
    const expectedId = await writeDockerArchiveDir(join(work, 'archive'), layer, configJson);
    report('load', `loading ${expectedId}`);
    const loadedId = await loadArchiveDir(join(work, 'archive'), signal);
    if (loadedId !== expectedId) throw new Error(`engine loaded ${loadedId}, expected ${expectedId}`);
    return loadedId;
  } finally {
    await removeTree(work);
  }
}
