import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import { pack } from 'tar-stream';
import { BerthError } from '../errors';
import { collect } from './archive-pack';
import { engineError, isNotFound } from './engine-errors';
import { SNAPSHOT_REPO } from './snapshot-image';

// The engine's root directory and storage driver never change while it runs: asked once.
const roots = new WeakMap<Dockerode, Promise<string | undefined>>();

function imageDbOf(docker: Dockerode): Promise<string | undefined> {
  let root = roots.get(docker);
  if (!root) {
    root = docker
      .info()
      .then((i: { DockerRootDir?: string; Driver?: string }) => (i.Driver === 'overlay2' && i.DockerRootDir ? `${i.DockerRootDir}/image/overlay2/imagedb/content/sha256` : undefined))
      .catch(() => undefined);
    roots.set(docker, root);
  }
  return root;
}

/**
 * The exact config bytes of a local image, read from the engine's image store on this machine
 * (the only place they are kept; `docker save` would copy every layer to get them). Checked
 * against the id, which is their sha256, so a changed file is never used. `undefined` when the
 * store cannot be read here (a remote or rootless engine, another driver) or the image is not in it.
 */
export async function rawImageConfig(docker: Dockerode, imageId: string): Promise<Buffer | undefined> {
  const dir = await imageDbOf(docker);
  const hex = imageId.replace(/^sha256:/, '');
  if (!dir || !/^[0-9a-f]{64}$/.test(hex)) return undefined;
  try {
    const bytes = await readFile(`${dir}/${hex}`);
    return createHash('sha256').update(bytes).digest('hex') === hex ? bytes : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Loads an image whose config's last layer is `layer` and whose other layers the engine already
 * holds (a snapshot's parent chain), tagged `berth-snapshot:<tag>` for each tag. The archive
 * carries only the new layer: the engine skips reading a layer whose chain it already has. The
 * engine checks the layer against the config's diff id; the resulting id is checked against the
 * config's digest. A missing parent layer is `image_missing`.
 */
export async function loadLayerImage(docker: Dockerode, o: { config: Buffer; layer: Buffer; tags: string[]; signal?: AbortSignal }): Promise<string> {
  o.signal?.throwIfAborted();
  const hex = createHash('sha256').update(o.config).digest('hex');
  const layers = (JSON.parse(o.config.toString('utf8')) as { rootfs: { diff_ids: string[] } }).rootfs.diff_ids.length;
  const p = pack();
  p.entry({ name: `${hex}.json` }, o.config);
  p.entry({ name: 'layer/layer.tar' }, o.layer);
  // The parents' entries name files the archive does not hold: the engine never opens them.
  const paths = Array.from({ length: layers - 1 }, (_, i) => `parent-${i}/layer.tar`);
  p.entry({ name: 'manifest.json' }, JSON.stringify([{ Config: `${hex}.json`, RepoTags: o.tags.map((t) => `${SNAPSHOT_REPO}:${t}`), Layers: [...paths, 'layer/layer.tar'] }]));
  p.finalize();
  const archive = await collect(p);
  try {
    // A buffer rather than a stream: the engine gets a Content-Length (docker-modem sends a Buffer as is).
    const load = docker.loadImage.bind(docker) as unknown as (file: Buffer, opts: object) => Promise<NodeJS.ReadableStream>;
    const progress = await load(archive, { quiet: true, abortSignal: o.signal });
    await new Promise<void>((resolve, reject) => docker.modem.followProgress(progress, (err: Error | null, out: Array<{ error?: string }>) => {
      const failed = err?.message ?? out.find((l) => l.error)?.error;
      return failed ? reject(new Error(failed)) : resolve();
    }));
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    if (/parent-\d+\/layer\.tar|no such file/i.test(msg)) throw new BerthError('image_missing', `cannot load snapshot image sha256:${hex.slice(0, 12)}: a parent layer is no longer on the engine`, { details: { imageId: `sha256:${hex}` } });
    throw engineError(`load snapshot image ${hex.slice(0, 12)}`, err);
  }
  try {
    await docker.getImage(`sha256:${hex}`).inspect();
  } catch (err) {
    if (isNotFound(err)) throw new BerthError('image_missing', `the engine loaded something other than snapshot image sha256:${hex.slice(0, 12)}`, { details: { imageId: `sha256:${hex}` } });
    throw engineError(`inspect image ${hex.slice(0, 12)}`, err);
  }
  return `sha256:${hex}`;
}
