import { createHash } from 'node:crypto';
import { nameBytes } from './confined/names';

/**
 * The content of a workspace tree, path by path (relative, `./`-prefixed as `find` prints them):
 * `f:<mode>:<sha256>` for a file, `d:<mode>` for a directory, `l:<target>` for a symlink,
 * `o:<mode>` for anything else. Times and owners are left out on purpose: a restore keeps
 * content and modes, and those are what a build depends on.
 */
export type WorkspaceManifest = Record<string, string>;

/**
 * The workspace digest: sha256 over `path NUL value LF` for every entry, sorted by path
 * (byte order). Equal trees give equal digests whatever the order they were scanned in. A name
 * (or link target) that is not UTF-8 is kept as lone surrogates (see `confined/names.ts`) and
 * hashed as its own bytes, so two such names never share a digest.
 */
export function manifestDigest(manifest: WorkspaceManifest): string {
  const hash = createHash('sha256');
  for (const path of Object.keys(manifest).sort(byteOrder)) hash.update(nameBytes(`${path}\0${manifest[path]}\n`));
  return `sha256:${hash.digest('hex')}`;
}

const byteOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
