import { posix } from 'node:path';
import { BerthError } from '../errors';

/** True when `path` is `root` or lies below it (both normalised, absolute). */
export function isWithin(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/**
 * Normalises a caller's path (absolute, or relative to the workspace) and refuses, with
 * `path_escape`, anything that leaves the workspace lexically. Symlinks are resolved separately,
 * inside the container, by {@link resolveInContainer}.
 */
export function workspacePath(root: string, input: string): string {
  if (input.includes('\0')) throw new BerthError('path_escape', 'path contains a NUL byte', { details: { path: input } });
  const joined = input.startsWith('/') ? posix.normalize(input) : posix.normalize(posix.join(root, input));
  const path = joined.length > 1 && joined.endsWith('/') ? joined.slice(0, -1) : joined;
  if (!isWithin(root, path)) {
    throw new BerthError('path_escape', `path "${input}" leaves the workspace ${root}`, { details: { path: input, workspace: root } });
  }
  return path;
}
