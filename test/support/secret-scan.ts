import { existsSync, readFileSync } from 'node:fs';
import type Dockerode from 'dockerode';
import { expect } from 'vitest';

/** What a leak looks like in bytes: the value, and its base64 with and without a trailing newline. */
export const leakForms = (v: string) => [v, Buffer.from(v).toString('base64').replace(/=+$/, ''), Buffer.from(`${v}\n`).toString('base64').replace(/=+$/, '')];

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
    for (const secret of secrets) for (const f of leakForms(secret)) expect(bytes.includes(f), `${what} holds ${f === secret ? 'a secret' : 'a base64 form'}`).toBe(false);
  }
}
