import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { execa } from 'execa';

/**
 * Writes `rootfs` as an uncompressed layer tar whose bytes depend only on the tree's names,
 * contents, modes and numeric owners. Owners come from the tree itself (no --owner flag) so that
 * /workspace and /home/berth keep uid 1000; atime/ctime are dropped because they change on
 * every build, and pax extended headers get a fixed name instead of one containing the pid.
 */
export async function writeLayerTar(rootfs: string, out: string, mtime: 'zero' | number, signal: AbortSignal): Promise<void> {
  const mtimeArgs = mtime === 'zero' ? ['--mtime=@0'] : [`--mtime=@${mtime}`, '--clamp-mtime'];
  await execa(
    'tar',
    [
      '--create',
      `--file=${out}`,
      `--directory=${rootfs}`,
      '--format=posix',
      '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
      '--sort=name',
      '--numeric-owner',
      '--one-file-system',
      ...mtimeArgs,
      '.',
    ],
    { cancelSignal: signal, env: { LC_ALL: 'C' } },
  );
}

/** `sha256:<hex>` of a file, streamed (layers reach hundreds of MB). */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}
