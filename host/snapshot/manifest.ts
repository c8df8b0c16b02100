import { createHash } from 'node:crypto';

/**
 * The content of a workspace tree, path by path (relative, `./`-prefixed as `find` prints them):
 * `f:<mode>:<sha256>` for a file, `d:<mode>` for a directory, `l:<target>` for a symlink,
 * `o:<mode>` for anything else. Times and owners are left out on purpose: a restore keeps
 * content and modes, and those are what a build depends on.
 */
export type WorkspaceManifest = Record<string, string>;

/**
 * The workspace digest: sha256 over `path NUL value LF` for every entry, sorted by path
 * (byte order). Equal trees give equal digests whatever the order they were scanned in.
 */
export function manifestDigest(manifest: WorkspaceManifest): string {
  const hash = createHash('sha256');
  for (const path of Object.keys(manifest).sort(byteOrder)) hash.update(`${path}\0${manifest[path]}\n`);
  return `sha256:${hash.digest('hex')}`;
}

/**
 * The manifest after some paths changed: each changed path takes its new value, or is removed
 * (with everything under it) when the scan no longer found it; a rescanned directory also loses
 * the children it no longer has.
 */
export function applyRescan(
  base: WorkspaceManifest,
  changed: string[],
  found: WorkspaceManifest,
  children: Map<string, Set<string>> = new Map(),
): WorkspaceManifest {
  const next: WorkspaceManifest = { ...base };
  const drop = (path: string) => {
    delete next[path];
    const prefix = `${path}/`;
    for (const key of Object.keys(next)) if (key.startsWith(prefix)) delete next[key];
  };
  for (const path of changed) if (!(path in found)) drop(path);
  for (const [dir, present] of children) {
    const prefix = `${dir}/`;
    for (const key of Object.keys(next)) {
      if (!key.startsWith(prefix)) continue;
      const child = prefix + key.slice(prefix.length).split('/')[0]!;
      if (!present.has(child) && !(child in found)) drop(child);
    }
  }
  return Object.assign(next, found);
}

const byteOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
