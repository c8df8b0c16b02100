import { copyFile, chmod, mkdir, readFile, symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { makeStandardDirs, writeAccounts } from '../accounts';
import type { ImageDefinition } from '../definition';

const folder = dirname(fileURLToPath(import.meta.url));

/** Debian's busybox-static: one static binary, so the image needs no libc or loader. */
const BUSYBOX = '/bin/busybox';

async function applets(): Promise<string[]> {
  const text = await readFile(join(folder, 'applets.txt'), 'utf8');
  return text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
}

/**
 * The installed package version: the binary is copied from the host, so a busybox upgrade must
 * change the definition hash. Outside Debian, the binary's own hash stands in for it.
 */
async function busyboxVersion(signal: AbortSignal): Promise<string> {
  const dpkg = await execa('dpkg-query', ['--show', '--showformat=${Version}', 'busybox-static'], { cancelSignal: signal, reject: false });
  if (dpkg.exitCode === 0 && dpkg.stdout !== '') return `busybox-static=${dpkg.stdout}`;
  const sum = await execa('sha256sum', [BUSYBOX], { cancelSignal: signal });
  return `busybox-sha256=${sum.stdout.split(' ')[0] ?? ''}`;
}

/** A few-MB image for tests and short plan steps: busybox, root and berth, /workspace. */
export const tiny: ImageDefinition = {
  name: 'tiny',
  folder,
  cmd: ['/bin/sh'],
  mtime: 'zero',
  async hashInputs(signal) {
    return [await busyboxVersion(signal)];
  },
  async buildRootfs(dir, { signal, progress }) {
    const available = new Set((await execa(BUSYBOX, ['--list'], { cancelSignal: signal })).stdout.split('\n'));
    const wanted = await applets();
    const missing = wanted.filter((a) => !available.has(a));
    if (missing.length > 0) throw new Error(`${BUSYBOX} lacks applets: ${missing.join(', ')}`);
    await mkdir(join(dir, 'bin'), { recursive: true });
    await chmod(join(dir, 'bin'), 0o755);
    await copyFile(BUSYBOX, join(dir, 'bin/busybox'));
    await chmod(join(dir, 'bin/busybox'), 0o755);
    for (const applet of wanted) await symlink('busybox', join(dir, 'bin', applet));
    // Scripts written for a distribution start with `#!/usr/bin/env ...`.
    await mkdir(join(dir, 'usr/bin'), { recursive: true, mode: 0o755 });
    await chmod(join(dir, 'usr'), 0o755);
    await chmod(join(dir, 'usr/bin'), 0o755);
    await symlink('../../bin/busybox', join(dir, 'usr/bin/env'));
    for (const rel of ['etc', 'proc', 'sys', 'dev']) {
      await mkdir(join(dir, rel), { recursive: true });
      await chmod(join(dir, rel), 0o755);
    }
    await writeAccounts(dir, '/bin/sh');
    await makeStandardDirs(dir);
    progress(`busybox with ${wanted.length} applets`);
  },
};
