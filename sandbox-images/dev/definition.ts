import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { appendBerthAccount, makeStandardDirs } from '../accounts';
import type { ImageDefinition } from '../definition';
import { removeTree } from '../remove-tree';

const folder = dirname(fileURLToPath(import.meta.url));

/**
 * Bookworm's release day. mmdebstrap stamps generated files with it and the layer clamps newer
 * mtimes to it, so two builds from the same package versions give the same bytes.
 */
const SOURCE_DATE_EPOCH = 1686355200;

async function packages(): Promise<string[]> {
  const text = await readFile(join(folder, 'packages.txt'), 'utf8');
  return text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
}

/**
 * Debian bookworm with a toolchain, git, Python and Node for real builds and agent work.
 * Package versions come from the mirror at build time, so the hash cannot cover them: a
 * rebuild after a point release yields a new image id under the same definition hash.
 */
export const dev: ImageDefinition = {
  name: 'dev',
  folder,
  cmd: ['/bin/bash'],
  mtime: SOURCE_DATE_EPOCH,
  async hashInputs() {
    return [`source-date-epoch=${SOURCE_DATE_EPOCH}`];
  },
  async buildRootfs(dir, { signal, progress }) {
    const include = (await packages()).join(',');
    progress(`mmdebstrap bookworm minbase + ${include}`);
    // The suite name alone makes mmdebstrap use this machine's apt sources.
    await execa('mmdebstrap', ['--mode=root', '--variant=minbase', `--include=${include}`, 'bookworm', dir], {
      cancelSignal: signal,
      env: { SOURCE_DATE_EPOCH: String(SOURCE_DATE_EPOCH) },
      forceKillAfterDelay: 30_000,
    });
    // Docker mounts its own /dev; device nodes in a layer only make the tar host-dependent.
    for (const entry of await readdir(join(dir, 'dev'))) await removeTree(join(dir, 'dev', entry));
    await appendBerthAccount(dir, '/bin/bash');
    await makeStandardDirs(dir);
  },
};
