import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BerthError } from '../errors';
import type { ArtifactStore, BlobState } from './artifact-store';

const HEX = /^[0-9a-f]{64}$/;

/**
 * A transform that hashes and counts what passes through it. With `expect`, it ends in an error
 * (rather than completing) when the bytes were not exactly those: a reader never sees a stream
 * that looks whole but is not.
 */
export function hashing(expect?: { sha256: string; size: number; error: (got: { sha256: string; size: number }) => Error }): Transform & { digest(): { sha256: string; size: number } } {
  const h = createHash('sha256');
  let size = 0;
  let result: { sha256: string; size: number } | undefined;
  const digest = () => (result ??= { sha256: h.digest('hex'), size });
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      h.update(chunk);
      size += chunk.length;
      cb(null, chunk);
    },
    flush(cb) {
      if (!expect) return cb();
      const got = digest();
      cb(got.sha256 === expect.sha256.replace(/^sha256:/, '') && got.size === expect.size ? null : expect.error(got));
    },
  });
  return Object.assign(t, { digest });
}

/** The sha256 and size of a stream's bytes. */
export async function digestOf(source: Readable, signal?: AbortSignal): Promise<{ sha256: string; size: number }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const c of source) {
    signal?.throwIfAborted();
    h.update(c as Buffer);
    size += (c as Buffer).length;
  }
  return { sha256: h.digest('hex'), size };
}

/**
 * The default {@link ArtifactStore}: a directory holding `sha256/<hex>` files (read-only, 0444),
 * written to `tmp/` first, fsynced, and renamed into place only when complete, so a crash leaves
 * at most a stray temporary file and never a blob whose bytes do not match its name.
 */
export class LocalArtifactStore implements ArtifactStore {
  constructor(readonly location: string) {}

  private blob(sha256: string): string {
    if (!HEX.test(sha256)) throw new BerthError('artifact_digest_invalid', `"${sha256}" is not a sha256 hex digest`);
    return join(this.location, 'sha256', sha256);
  }

  async put(source: Readable, opts: { signal?: AbortSignal } = {}): Promise<{ sha256: string; size: number }> {
    await mkdir(join(this.location, 'tmp'), { recursive: true, mode: 0o700 });
    await mkdir(join(this.location, 'sha256'), { recursive: true, mode: 0o755 });
    const tmp = join(this.location, 'tmp', `put-${randomBytes(8).toString('hex')}`);
    const h = hashing();
    try {
      await pipeline(source, h, createWriteStream(tmp, { flags: 'wx', mode: 0o600 }), { signal: opts.signal });
      const fh = await open(tmp, 'r');
      await fh.sync().finally(() => fh.close());
      const d = h.digest();
      const final = this.blob(d.sha256);
      if ((await this.check(d.sha256, d.size, opts)) === 'present') {
        await unlink(tmp);
        return d;
      }
      await chmod(tmp, 0o444);
      await rename(tmp, final);
      const dir = await open(join(this.location, 'sha256'), 'r');
      await dir.sync().finally(() => dir.close());
      return d;
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
  }

  async check(sha256: string, size: number, opts: { signal?: AbortSignal } = {}): Promise<BlobState> {
    const path = this.blob(sha256);
    const st = await stat(path).catch(() => undefined);
    if (!st) return 'missing';
    if (!st.isFile() || st.size !== size) return 'altered';
    const d = await digestOf(createReadStream(path), opts.signal);
    return d.sha256 === sha256 && d.size === size ? 'present' : 'altered';
  }

  async open(sha256: string): Promise<Readable> {
    const path = this.blob(sha256);
    const st = await stat(path).catch(() => undefined);
    if (!st?.isFile()) throw new BerthError('artifact_missing', `blob sha256:${sha256} is not in the artifact store ${this.location}`, { details: { sha256 } });
    return createReadStream(path);
  }
}
