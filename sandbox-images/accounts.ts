import { appendFile, chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The non-root user every sandbox command runs as; host code relies on 1000:1000. */
export const BERTH_UID = 1000;
export const BERTH_GID = 1000;

/** Account lines for root and `berth`. */
export function accountLines(shell: string): { passwd: string[]; group: string[] } {
  return {
    passwd: [`root:x:0:0:root:/root:${shell}`, `berth:x:${BERTH_UID}:${BERTH_GID}:berth:/home/berth:${shell}`],
    group: ['root:x:0:', `berth:x:${BERTH_GID}:`],
  };
}

/** Writes /etc/passwd and /etc/group from scratch (images without a distribution base). */
export async function writeAccounts(rootfs: string, shell: string): Promise<void> {
  const { passwd, group } = accountLines(shell);
  await mkdir(join(rootfs, 'etc'), { recursive: true });
  await chmod(join(rootfs, 'etc'), 0o755);
  for (const [file, lines] of [['etc/passwd', passwd], ['etc/group', group]] as const) {
    await writeFile(join(rootfs, file), lines.join('\n') + '\n');
    // Explicit: a restrictive umask on the build machine must not change the layer's bytes.
    await chmod(join(rootfs, file), 0o644);
  }
}

/**
 * Adds `berth` to a distribution's account files. The shadow entries leave the last-change day
 * empty: shadow tools would write today's date there, which would make the layer differ by day.
 */
export async function appendBerthAccount(rootfs: string, shell: string): Promise<void> {
  const { passwd, group } = accountLines(shell);
  await appendFile(join(rootfs, 'etc/passwd'), passwd[1] + '\n');
  await appendFile(join(rootfs, 'etc/group'), group[1] + '\n');
  await appendFile(join(rootfs, 'etc/shadow'), 'berth:!::0:99999:7:::\n');
  await appendFile(join(rootfs, 'etc/gshadow'), 'berth:!::\n');
}

/**
 * Creates /workspace and /home/berth owned by berth, /root and a sticky /tmp. Modes are set with
 * chmod because mkdir's mode passes through the umask and drops the sticky bit.
 */
export async function makeStandardDirs(rootfs: string): Promise<void> {
  const dirs: Array<[string, number, number]> = [
    ['tmp', 0o1777, 0],
    ['root', 0o700, 0],
    ['home', 0o755, 0],
    ['home/berth', 0o755, BERTH_UID],
    ['workspace', 0o755, BERTH_UID],
  ];
  for (const [rel, mode, uid] of dirs) {
    const path = join(rootfs, rel);
    await mkdir(path, { recursive: true });
    await chmod(path, mode);
    await chown(path, uid, uid === 0 ? 0 : BERTH_GID);
  }
}
