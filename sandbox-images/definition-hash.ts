import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dockerArchitecture } from './docker-archive';
import type { ImageDefinition } from './definition';

const here = dirname(fileURLToPath(import.meta.url));

/** Shared build code whose text decides image bytes; the CLI and engine glue do not. */
const SHARED_INPUTS = ['accounts.ts', 'layer-tar.ts', 'docker-archive.ts', 'definition-hash.ts'];

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .filter((p) => !relative(dir, p).split('/').includes('out'))
    .sort();
}

/**
 * Hex sha256 over everything that decides an image's bytes: the definition folder's files, the
 * shared build code, the target architecture and the definition's host facts (such as the
 * installed busybox version). Equal hashes mean an existing image may be reused.
 */
export async function definitionHash(def: ImageDefinition, signal: AbortSignal): Promise<string> {
  const hash = createHash('sha256');
  const feed = (label: string, data: string | Buffer): void => {
    hash.update(`${label}\0${data.length}\0`);
    hash.update(data);
  };
  feed('name', def.name);
  feed('arch', dockerArchitecture());
  for (const file of await listFiles(def.folder)) feed(`def:${relative(def.folder, file)}`, await readFile(file));
  for (const file of SHARED_INPUTS) feed(`shared:${file}`, await readFile(join(here, file)));
  for (const fact of await def.hashInputs(signal)) feed('fact', fact);
  return hash.digest('hex');
}
