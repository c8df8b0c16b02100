import { gunzipSync } from 'node:zlib';
import { existsSync, readFileSync } from 'node:fs';
import type Dockerode from 'dockerode';
import { expect } from 'vitest';

/**
 * The base64 characters of `v` that any encoded text holding it at byte offset `offset` contains.
 * Written out here rather than taken from host/secrets, so the test does not share the scrubber's bugs.
 */
function base64Inner(v: string, offset: number, alphabet: 'base64' | 'base64url'): string {
  const enc = Buffer.concat([Buffer.alloc(offset), Buffer.from(v)]).toString(alphabet);
  return enc.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + Buffer.byteLength(v))) / 6));
}

/**
 * What a leak looks like in bytes: the value, its base64 at each of the three byte offsets in both
 * alphabets (which covers the whole encodings, with or without a trailing newline), and its hex in both cases.
 */
export const leakForms = (v: string) => {
  const hex = Buffer.from(v).toString('hex');
  return [v, hex, hex.toUpperCase(), ...[0, 1, 2].flatMap((o) => [base64Inner(v, o, 'base64'), base64Inner(v, o, 'base64url')])];
};

/** A named byte stream to scan for secrets. */
export type Scanned = Array<[what: string, bytes: Buffer]>;

/** The SQLite store file and its WAL and shared-memory files, those that exist. */
export function storeFiles(store: string): Scanned {
  const out: Scanned = [];
  for (const suffix of ['', '-wal', '-shm']) if (existsSync(store + suffix)) out.push([`sqlite${suffix}`, readFileSync(store + suffix)]);
  return out;
}

/** `docker save` of one image, as bytes (every layer and the config). */
export async function saveImage(docker: Dockerode, ref: string): Promise<Buffer> {
  const stream = await docker.getImage(ref).get();
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/** Fails naming the stream and the form when any scanned stream holds any form of any secret. */
export function expectNoLeaks(scanned: Scanned, secrets: readonly string[]): void {
  for (const [what, bytes] of scanned) {
    for (const secret of secrets) for (const f of leakForms(secret)) expect(bytes.includes(f), `${what} holds ${f === secret ? 'a secret' : `an encoded form ${f}`}`).toBe(false);
  }
}

/**
 * The files of a registry's storage as a scan sees them: gzip-compressed layer blobs are
 * decompressed (a value inside a pushed layer is only visible uncompressed), everything else as stored.
 */
export function registryStorage(files: Array<[path: string, bytes: Buffer]>): Scanned {
  return files.map(([path, bytes]) => [`registry ${path}`, bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes]);
}

/**
 * Streams `docker save` of images (every layer and config, a layer they share once) through a scan
 * for every form of every secret, without holding them: snapshots of a large base image are hundreds
 * of MB each. Chunks overlap by the longest form, so a value split across two chunks is still found.
 * Returns the bytes scanned.
 */
export async function expectNoLeaksInImages(docker: Dockerode, refs: string[], secrets: readonly string[]): Promise<number> {
  const forms = secrets.flatMap((s) => leakForms(s).map((f) => [s, f] as const));
  const overlap = Math.max(...forms.map(([, f]) => Buffer.byteLength(f))) - 1;
  // dockerode has `getImages` (GET /images/get?names=..&names=..) but its types do not declare it.
  const saveAll = docker as unknown as { getImages(o: { names: string[] }): Promise<AsyncIterable<Buffer>> };
  const stream = await saveAll.getImages({ names: refs });
  let tail = Buffer.alloc(0);
  let bytes = 0;
  for await (const c of stream) {
    bytes += c.length;
    const window = Buffer.concat([tail, c]);
    for (const [secret, f] of forms) if (window.includes(f)) expect.fail(`images ${refs.join(' ')} hold ${f === secret ? 'a secret' : `an encoded form ${f}`}`);
    tail = window.subarray(Math.max(0, window.length - overlap));
  }
  return bytes;
}
