import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type Dockerode from 'dockerode';
import { extract } from 'tar-stream';
import { engineError } from './engine-errors';

/** What {@link readImageFilesByDigest} found: contents by sha256 (hex), and wanted digests whose files are past the cap. */
export interface ImageFiles {
  found: Map<string, Buffer>;
  tooLarge: Set<string>;
}

/** Files larger than this are neither held nor hashed (a text diff has no use for them). */
const HASH_ONLY_MAX = 8 * 1024 * 1024;

/**
 * The contents of regular files of an image whose sha256 is one of `sha256s`, read from the
 * engine's export of the image (`docker save`: every layer, parsed as a stream, nothing written to
 * disk, no container). Matching by content digest (the workspace manifest's) means no path in a
 * layer is ever resolved or trusted: a name is only a name here. Only files of at most `maxBytes`
 * are held; a wanted digest seen only on a larger file (up to 8 MiB, hashed without being held) is
 * reported in `tooLarge`. Stops reading once every digest is accounted for.
 */
export async function readImageFilesByDigest(docker: Dockerode, imageId: string, sha256s: readonly string[], o: { maxBytes: number; signal?: AbortSignal }): Promise<ImageFiles> {
  const wanted = new Set(sha256s);
  const found = new Map<string, Buffer>();
  const tooLarge = new Set<string>();
  if (wanted.size === 0) return { found, tooLarge };
  const raw = (await docker.getImage(imageId).get().catch((err: unknown) => {
    throw engineError(`export image ${imageId}`, err);
  })) as unknown as Readable;
  const outer = extract();
  const stop = () => raw.destroy();
  o.signal?.addEventListener('abort', stop, { once: true });
  const done = () => found.size + tooLarge.size >= wanted.size;
  const consume = (async () => {
    for await (const entry of outer) {
      const h = entry.header;
      // Layers: `<id>/layer.tar` (the engine's own layout) or `blobs/sha256/<hex>` (OCI layout, whose JSON blobs are no tar and read as nothing).
      if (!done() && h.type === 'file' && (/\/layer\.tar$/.test(h.name) || /^blobs\/sha256\/[0-9a-f]{64}$/.test(h.name))) {
        await readLayer(entry as unknown as AsyncIterable<Buffer>, wanted, found, tooLarge, o.maxBytes).catch(() => undefined);
      } else {
        entry.resume();
        await new Promise<void>((r) => entry.once('end', () => r()));
      }
      if (done()) break;
    }
  })();
  try {
    await Promise.all([pipeline(raw, outer).catch((err: unknown) => (done() ? undefined : Promise.reject(err))), consume]);
  } catch (err) {
    o.signal?.throwIfAborted();
    if (!done()) throw engineError(`read image ${imageId}`, err);
  } finally {
    o.signal?.removeEventListener('abort', stop);
    raw.destroy();
  }
  return { found, tooLarge };
}

/** One layer tar: hashes each small regular file, keeps the wanted ones. */
async function readLayer(layer: AsyncIterable<Buffer>, wanted: Set<string>, found: Map<string, Buffer>, tooLarge: Set<string>, maxBytes: number): Promise<void> {
  const inner = extract();
  const feed = (async () => {
    for await (const b of layer) {
      if (inner.destroyed) continue;
      if (!inner.write(b)) {
        await new Promise<void>((r) => {
          const go = (): void => {
            inner.off('drain', go);
            inner.off('close', go);
            r();
          };
          inner.on('drain', go);
          inner.on('close', go);
        });
      }
    }
    if (!inner.destroyed) (inner as unknown as { end(): void }).end();
  })();
  const read = (async () => {
    for await (const entry of inner) {
      const size = entry.header.size ?? 0;
      if (entry.header.type !== 'file' || size > HASH_ONLY_MAX) {
        for await (const _ of entry);
        continue;
      }
      // Past the cap only hashed, never held.
      const hash = createHash('sha256');
      const parts: Buffer[] = [];
      for await (const b of entry as AsyncIterable<Buffer>) {
        hash.update(b);
        if (size <= maxBytes) parts.push(b);
      }
      const sha = hash.digest('hex');
      if (wanted.has(sha) && !found.has(sha)) {
        if (size <= maxBytes) found.set(sha, Buffer.concat(parts));
        else tooLarge.add(sha);
      }
    }
  })();
  // A blob that is no tar fails the inner parser: the rest of it is read and dropped.
  await Promise.all([feed, read.catch(async () => {
    inner.destroy();
  })]);
}
