import { closeSync, constants as fsc, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, type BigIntStats } from 'node:fs';

/**
 * A directory of a sandbox's filesystem held open by descriptor, and the device every object under
 * it must be on. Children are reached only as `/proc/self/fd/<fd>/<name>`: the kernel resolves the
 * magic link to this very directory (a rename or a swapped-in symlink cannot redirect it), and
 * `name` is one component from `readdir`, never followed when it is a link. No path the sandbox
 * controls is ever resolved from the host's root, so no component can leave the directory.
 */
export interface ConfinedDir {
  readonly fd: number;
  readonly dev: bigint;
}

/** `open(2)`'s O_PATH: Node passes the number through. It opens nothing but the name's inode (no driver runs, no read). */
export const O_PATH = 0o10000000;
const DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;

const gone = (err: unknown) => ['ENOENT', 'ENOTDIR', 'ELOOP'].includes((err as NodeJS.ErrnoException).code ?? '');

/** `/proc/self/fd/<fd>/<name>` as bytes: names are bytes, not text. */
export function childPath(dir: ConfinedDir, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`/proc/self/fd/${dir.fd}/`), name]);
}

/**
 * Opens a host directory this process trusts (an overlay directory named by the engine) and the
 * components below it (the workspace path, from the environment), one by one, never following a
 * link. `undefined` when a component is missing or is not a directory on the root's device.
 */
export function openConfinedRoot(hostDir: string, below: string[] = []): ConfinedDir | undefined {
  let dir: ConfinedDir;
  try {
    const fd = openSync(hostDir, DIR_FLAGS);
    dir = { fd, dev: fstatSync(fd, { bigint: true }).dev };
  } catch (err) {
    if (gone(err)) return undefined;
    throw err;
  }
  for (const c of below) {
    if (c === '' || c === '.' || c === '..') continue;
    const next = openDirAt(dir, Buffer.from(c));
    closeDir(dir);
    if (!next) return undefined;
    dir = next;
  }
  return dir;
}

/** The child directory `name`, or `undefined` when it is gone, a link, or anything but a directory on the same device. */
export function openDirAt(parent: ConfinedDir, name: Buffer): ConfinedDir | undefined {
  let fd: number;
  try {
    fd = openSync(childPath(parent, name), DIR_FLAGS);
  } catch (err) {
    if (gone(err)) return undefined;
    throw err;
  }
  const st = fstatSync(fd, { bigint: true });
  if (!st.isDirectory() || st.dev !== parent.dev) {
    closeSync(fd);
    return undefined;
  }
  return { fd, dev: parent.dev };
}

export function closeDir(dir: ConfinedDir): void {
  closeSync(dir.fd);
}

/** The child's own stat fields (a link is not followed), or `undefined` when it is gone. */
export function lstatAt(parent: ConfinedDir, name: Buffer): BigIntStats | undefined {
  try {
    return lstatSync(childPath(parent, name), { bigint: true });
  } catch (err) {
    if (gone(err)) return undefined;
    throw err;
  }
}

/** The names in the directory, as bytes, sorted by byte order. */
export function readdirAt(dir: ConfinedDir): Buffer[] {
  return (readdirSync(Buffer.from(`/proc/self/fd/${dir.fd}`), { encoding: 'buffer' }) as Buffer[]).sort(Buffer.compare);
}

/** A symlink's target, as bytes; `undefined` when it is gone or no longer a link. */
export function readlinkAt(parent: ConfinedDir, name: Buffer): Buffer | undefined {
  try {
    return readlinkSync(childPath(parent, name), { encoding: 'buffer' });
  } catch (err) {
    if (gone(err) || (err as NodeJS.ErrnoException).code === 'EINVAL') return undefined;
    throw err;
  }
}

/**
 * Opens the child for reading only once it is proved a regular file on the directory's device:
 * an O_PATH open (which runs no driver and reads nothing, so a FIFO or a device is never opened)
 * pins the inode, `fstat` checks it, and only then is that very inode reopened through its magic
 * link. `undefined` when it is gone or anything but a regular file.
 */
export function openFileAt(parent: ConfinedDir, name: Buffer): { fd: number; st: BigIntStats } | undefined {
  let pinned: number;
  try {
    pinned = openSync(childPath(parent, name), O_PATH | fsc.O_NOFOLLOW);
  } catch (err) {
    if (gone(err)) return undefined;
    throw err;
  }
  try {
    const st = fstatSync(pinned, { bigint: true });
    if (!st.isFile() || st.dev !== parent.dev) return undefined;
    const fd = openSync(`/proc/self/fd/${pinned}`, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOCTTY);
    const again = fstatSync(fd, { bigint: true });
    if (again.ino !== st.ino || again.dev !== st.dev || !again.isFile()) {
      closeSync(fd);
      return undefined;
    }
    return { fd, st: again };
  } finally {
    closeSync(pinned);
  }
}
