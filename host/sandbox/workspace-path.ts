import { posix } from 'node:path';
import { BerthError } from '../errors';

/** True when `path` is `root` or lies below it (both normalised, absolute). */
export function isWithin(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** Linux's NAME_MAX and PATH_MAX (the latter counts the terminating NUL). */
const NAME_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4096;

/**
 * Normalises a caller's path (absolute, or relative to the workspace) and refuses, with
 * `path_escape`, anything that leaves the workspace lexically. Symlinks are resolved separately,
 * inside the container, by {@link resolveInContainer}.
 */
export function workspacePath(root: string, input: string): string {
  if (input.includes('\0')) throw new BerthError('path_invalid', 'path contains a NUL byte', { details: { path: input } });
  // Linux's limits: over them the engine's stat fails with a bare 500, which read as "not a directory".
  const long = input.split('/').find((c) => Buffer.byteLength(c) > NAME_MAX_BYTES);
  if (long !== undefined) throw new BerthError('path_invalid', `path "${input.slice(0, 80)}..." has a name of ${Buffer.byteLength(long)} bytes; a file name is at most ${NAME_MAX_BYTES} bytes`, { details: { path: input.slice(0, 1024) } });
  const joined = input.startsWith('/') ? posix.normalize(input) : posix.normalize(posix.join(root, input));
  const path = joined.length > 1 && joined.endsWith('/') ? joined.slice(0, -1) : joined;
  if (Buffer.byteLength(path) >= PATH_MAX_BYTES) throw new BerthError('path_invalid', `path "${input.slice(0, 80)}..." is ${Buffer.byteLength(path)} bytes long; a path is at most ${PATH_MAX_BYTES - 1} bytes`, { details: { path: input.slice(0, 1024) } });
  if (!isWithin(root, path)) {
    throw new BerthError('path_escape', `path "${input}" leaves the workspace ${root}`, { details: { path: input, workspace: root } });
  }
  return path;
}
