import type Dockerode from 'dockerode';
import { posix } from 'node:path';
import { BerthError } from '../errors';
import { isNotFound } from './engine-errors';
import { isWithin } from './workspace-path';

/** Go's os.FileMode bits as the engine reports them (above 2^31, so no 32-bit bitwise ops). */
const bit = (mode: number, n: number): boolean => Math.floor(mode / 2 ** n) % 2 === 1;
const DIR = 31;
const SYMLINK = 27;
/** Device, named pipe, socket, char device, irregular. */
const OTHER_TYPES = [26, 25, 24, 21, 19];

export interface PathStat {
  name: string;
  size: number;
  mode: number;
  /** Set for a symlink: its target fully resolved inside the container's root. */
  linkTarget: string;
}

export const isDir = (s: PathStat): boolean => bit(s.mode, DIR);
export const isSymlink = (s: PathStat): boolean => bit(s.mode, SYMLINK);
export const isRegular = (s: PathStat): boolean => !isDir(s) && !isSymlink(s) && !OTHER_TYPES.some((n) => bit(s.mode, n));
export const permBits = (s: PathStat): number => s.mode % 0o1000;

/** `HEAD /containers/{id}/archive`: one lstat, with symlinks in the parent directories resolved. */
export async function statPath(container: Dockerode.Container, path: string): Promise<PathStat | undefined> {
  try {
    const res = (await container.infoArchive({ path })) as { headers?: Record<string, string | undefined>; resume?: () => void };
    res.resume?.();
    const header = res.headers?.['x-docker-container-path-stat'];
    if (!header) throw new Error(`engine returned no path stat for ${path}`);
    return JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as PathStat;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

export interface ResolvedPath {
  /** The path with every symlink followed; inside the workspace. */
  real: string;
  /** Stat of `real`, or undefined when it does not exist. */
  stat: PathStat | undefined;
  /** When `real` does not exist: the deepest existing ancestor and the components still missing. */
  existingAncestor: string;
  missing: string[];
}

/**
 * Follows symlinks of a lexically confined path inside the container and refuses (`path_escape`)
 * when any of them leads outside the real workspace. Every prefix from the workspace down is
 * stat'ed in parallel (one cheap HEAD each, no exec): the engine reports each symlink's fully
 * resolved target, and the deepest symlink on the way decides where the path really lands.
 *
 * Race: a command running in the sandbox at the same time can swap a directory for a symlink
 * between this check and the archive call. The engine still scopes every archive call to the
 * container's root, so the worst outcome stays inside the sandbox.
 */
export async function resolveInContainer(container: Dockerode.Container, workspace: string, path: string, depth = 0): Promise<ResolvedPath> {
  const rel = path === workspace ? [] : path.slice(workspace.length + 1).split('/');
  const prefixes = [workspace, ...rel.map((_, i) => posix.join(workspace, ...rel.slice(0, i + 1)))];
  // Stat errors are kept until the walk below: a 500 below a regular file just means ENOTDIR.
  const results = await Promise.all(
    prefixes.map((p) =>
      statPath(container, p).then(
        (stat) => ({ stat, error: undefined as unknown }),
        (error: unknown) => ({ stat: undefined, error }),
      ),
    ),
  );
  const stats = results.map((r) => r.stat);

  if (results[0]!.error !== undefined) throw results[0]!.error;
  const root = stats[0];
  if (!root) throw new BerthError('workspace_missing', `workspace ${workspace} does not exist in the sandbox`);
  const realRoot = isSymlink(root) ? root.linkTarget : workspace;

  let real = realRoot;
  let missingFrom = -1;
  for (let i = 1; i < prefixes.length; i += 1) {
    const s = stats[i];
    const previous = stats[i - 1];
    const error = results[i]!.error;
    const enotdir = previous !== undefined && (!isDir(previous) && !isSymlink(previous) ? true : (error as { statusCode?: number } | undefined)?.statusCode === 500);
    if (enotdir) throw new BerthError('not_a_directory', `"${prefixes[i - 1]}" is not a directory`, { details: { path } });
    if (error !== undefined) throw error;
    if (!s) {
      missingFrom = i;
      break;
    }
    if (isSymlink(s)) {
      if (!isWithin(realRoot, s.linkTarget)) {
        throw new BerthError('path_escape', `"${prefixes[i]}" is a symlink to ${s.linkTarget}, outside the workspace`, {
          details: { path, symlink: prefixes[i], target: s.linkTarget },
        });
      }
      real = s.linkTarget;
    } else {
      real = posix.join(real, rel[i - 1]!);
    }
  }
  if (missingFrom === -1) {
    const last = stats[stats.length - 1]!;
    // The engine resolves a symlink's target completely, so one more pass settles a final
    // symlink (and tells whether it dangles); a second one would mean a loop.
    if (prefixes.length > 1 && isSymlink(last)) {
      if (depth > 0) throw new BerthError('path_escape', `symlink loop at "${path}"`, { details: { path } });
      return resolveInContainer(container, realRoot, real, depth + 1);
    }
    return { real, stat: last, existingAncestor: real, missing: [] };
  }
  // A missing component cannot be followed further; a dangling symlink surfaces here as missing.
  return { real: posix.join(real, ...rel.slice(missingFrom - 1)), stat: undefined, existingAncestor: real, missing: rel.slice(missingFrom - 1) };
}
