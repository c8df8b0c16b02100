import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, readFile, realpath } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import type Dockerode from 'dockerode';

/**
 * The engine's on-disk stores of a local overlay2 engine, when this process can read them (local
 * engine, run as root). Asked once per client: the root and the driver never change while it runs.
 */
const roots = new WeakMap<Dockerode, Promise<string | undefined>>();

export function overlayRoot(docker: Dockerode): Promise<string | undefined> {
  let root = roots.get(docker);
  if (!root) {
    root = docker
      .info()
      .then((i: { DockerRootDir?: string; Driver?: string }) => (i.Driver === 'overlay2' && i.DockerRootDir ? i.DockerRootDir : undefined))
      .catch(() => undefined);
    roots.set(docker, root);
  }
  return root;
}

/** A layer of a local image as the registry would store it uncompressed: digest = diff id. */
export interface LocalLayer {
  diffId: string;
  /** Bytes of the files in the layer (the engine's `size`), before tar headers. */
  size: number;
  /** The exact tar stream whose sha256 is `diffId`, or undefined when it cannot be rebuilt here. */
  tar(): Promise<Buffer | undefined>;
  /** The same bytes as they are read (throws {@link LayerUnavailable} part way when they cannot be). */
  chunks(): AsyncIterable<Buffer>;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

/** The chain ids of a layer stack (the engine's layerdb keys): chain(1) = diff(1), chain(n) = sha256(chain(n-1) + " " + diff(n)). */
export function chainIds(diffIds: string[]): string[] {
  const out: string[] = [];
  for (const d of diffIds) out.push(out.length === 0 ? d : `sha256:${sha(`${out.at(-1)!} ${d}`)}`);
  return out;
}

type SplitEntry = { type: 1 | 2; name?: string; raw_name?: string; size?: number; payload?: string | null };

/** The layer cannot be rebuilt here (a file gone, changed or over the bound): its stream stops with this. */
export class LayerUnavailable extends Error {}

/**
 * Rebuilds a layer's tar stream byte for byte from the engine's tar-split record (raw headers and
 * padding, in order) and the files of the layer's diff directory, as the engine itself does for
 * `docker save` and its own pushes. The committed layer directory is immutable (no container writes
 * to a lower layer), and every file must resolve inside it as a regular file of the recorded size;
 * the result is only ever used under its diff id, which the registry checks on upload, so a
 * mismatch is refused there and nothing else is sent in its place. Yields as it reads, so an
 * upload can send the first bytes while the rest is still being read; throws
 * {@link LayerUnavailable} part way when it cannot go on.
 */
async function* tarChunks(layerDb: string, diffDir: string, maxBytes: number): AsyncGenerator<Buffer> {
  const lines = gunzipSync(await readFile(`${layerDb}/tar-split.json.gz`)).toString('utf8').split('\n');
  let total = 0;
  const root = `${await realpath(diffDir)}/`;
  const rootBytes = Buffer.from(root);
  for (const line of lines) {
    if (!line) continue;
    const e = JSON.parse(line) as SplitEntry;
    if (e.type === 2) {
      if (e.payload) yield Buffer.from(e.payload, 'base64');
      continue;
    }
    const size = e.size ?? 0;
    if (size === 0) continue;
    if ((total += size) > maxBytes) throw new LayerUnavailable('over the bound');
    const name = e.raw_name !== undefined ? Buffer.from(e.raw_name, 'base64') : Buffer.from(e.name ?? '', 'utf8');
    const real = await realpath(Buffer.concat([rootBytes, name]), { encoding: 'buffer' });
    if (!real.subarray(0, root.length).equals(rootBytes)) throw new LayerUnavailable('outside the layer');
    const fh = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      if (!st.isFile() || st.size !== size) throw new LayerUnavailable('not the recorded file');
      // Read in pieces of at most 1 MiB, each sent before the next is read.
      for (let off = 0; off < size; ) {
        const b = Buffer.allocUnsafe(Math.min(size - off, 1 << 20));
        let got = 0;
        while (got < b.length) {
          const { bytesRead } = await fh.read(b, got, b.length - got, off + got);
          if (bytesRead === 0) throw new LayerUnavailable('file shorter than recorded');
          got += bytesRead;
        }
        off += got;
        yield b;
      }
    } finally {
      await fh.close();
    }
  }
}

async function rebuildTar(layerDb: string, diffDir: string, maxBytes: number): Promise<Buffer | undefined> {
  const parts: Buffer[] = [];
  try {
    for await (const c of tarChunks(layerDb, diffDir, maxBytes)) parts.push(c);
  } catch {
    return undefined;
  }
  return Buffer.concat(parts);
}

// A layer's record never changes while the layer exists (a layer is immutable; its chain id names
// its content and parents), so it is read once per process. Bounded; an evicted entry is read again.
const metas = new Map<string, { size: number; cacheId: string }>();

async function layerMeta(db: string): Promise<{ size: number; cacheId: string } | undefined> {
  const hit = metas.get(db);
  if (hit) return hit;
  try {
    const [size, cacheId] = await Promise.all([readFile(`${db}/size`, 'utf8'), readFile(`${db}/cache-id`, 'utf8')]);
    const meta = { size: Number(size.trim()), cacheId: cacheId.trim() };
    if (!/^[0-9a-f]{64}$/.test(meta.cacheId) || !Number.isFinite(meta.size)) return undefined;
    if (metas.size >= 4096) metas.delete(metas.keys().next().value!);
    metas.set(db, meta);
    return meta;
  } catch {
    return undefined;
  }
}

/**
 * A local image's exact config bytes and its layers, read from the engine's stores on this machine
 * (overlay2, local, root), so that a push can go straight to the registry. `undefined` when they
 * cannot be read here or the image is not on this engine; the caller then pushes through the engine.
 */
export async function localImage(docker: Dockerode, imageId: string, o: { maxLayerBytes: number }): Promise<{ config: Buffer; layers: LocalLayer[] } | undefined> {
  const root = await overlayRoot(docker);
  const hex = imageId.replace(/^sha256:/, '');
  if (!root || !/^[0-9a-f]{64}$/.test(hex)) return undefined;
  let config: Buffer;
  try {
    config = await readFile(`${root}/image/overlay2/imagedb/content/sha256/${hex}`);
  } catch {
    return undefined;
  }
  if (createHash('sha256').update(config).digest('hex') !== hex) return undefined;
  const diffIds = (JSON.parse(config.toString('utf8')) as { rootfs?: { diff_ids?: string[] } }).rootfs?.diff_ids ?? [];
  const chains = chainIds(diffIds);
  const layers: LocalLayer[] = [];
  for (const [i, diffId] of diffIds.entries()) {
    const db = `${root}/image/overlay2/layerdb/sha256/${chains[i]!.replace(/^sha256:/, '')}`;
    const meta = await layerMeta(db);
    if (!meta) return undefined;
    const { size, cacheId } = meta;
    layers.push({
      diffId,
      size,
      tar: () => (size > o.maxLayerBytes ? Promise.resolve(undefined) : rebuildTar(db, `${root}/overlay2/${cacheId}/diff`, o.maxLayerBytes).catch(() => undefined)),
      chunks: () => (size > o.maxLayerBytes ? (async function* () { throw new LayerUnavailable('over the bound'); })() : tarChunks(db, `${root}/overlay2/${cacheId}/diff`, o.maxLayerBytes)),
    });
  }
  return { config, layers };
}
