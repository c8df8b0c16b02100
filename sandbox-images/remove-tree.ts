import { readFile, rm } from 'node:fs/promises';
import { resolve } from 'node:path';

/**
 * Deletes a build directory, but never while something is mounted inside it: a chroot build
 * that died mid-way may leave /proc or /dev bound there, and a recursive delete would then
 * reach into the host's own filesystems.
 */
export async function removeTree(dir: string): Promise<void> {
  const root = resolve(dir) + '/';
  const mounts = await readFile('/proc/self/mounts', 'utf8').catch(() => '');
  const inside = mounts
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((mountPoint) => mountPoint.startsWith(root));
  if (inside.length > 0) throw new Error(`refusing to delete ${dir}: still mounted inside: ${inside.join(', ')}`);
  await rm(dir, { recursive: true, force: true });
}
