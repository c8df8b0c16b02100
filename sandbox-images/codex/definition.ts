import { chmod, copyFile, mkdir, mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { appendBerthAccount, makeStandardDirs } from '../accounts';
import type { ImageDefinition } from '../definition';
import { removeTree } from '../remove-tree';

const folder = dirname(fileURLToPath(import.meta.url));

/** Bookworm's release day, as for `dev`: generated files are stamped with it and newer mtimes clamped to it. */
const SOURCE_DATE_EPOCH = 1686355200;

/**
 * OpenAI's Codex CLI, the linux-x64 package that `@openai/codex` installs as its optional
 * dependency: it carries a static (musl) binary, so the image needs no Node. Pinned by version
 * and by the registry's integrity, which the build checks, so the definition hash covers the bytes.
 */
export const CODEX_PACKAGE = '@openai/codex@0.171.0-linux-x64';
export const CODEX_INTEGRITY = 'sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw==';
const VENDOR = 'package/vendor/x86_64-unknown-linux-musl';
/** What goes to /usr/local/bin: the CLI, and the ripgrep its prompts tell the model to prefer. */
const BINARIES: Array<[inTarball: string, name: string]> = [
  [`${VENDOR}/bin/codex`, 'codex'],
  [`${VENDOR}/codex-path/rg`, 'rg'],
];

/**
 * Fetches the package tarball with `npm pack` (the ordinary npm client, its cache and config)
 * and checks it against the pinned integrity before any byte of it enters the rootfs.
 */
async function packCodex(dest: string, signal: AbortSignal): Promise<string> {
  const packed = await execa('npm', ['pack', CODEX_PACKAGE, '--json', '--pack-destination', dest], { cancelSignal: signal, cwd: dest, forceKillAfterDelay: 10_000 });
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; integrity: string }>;
  if (!info) throw new Error(`npm pack ${CODEX_PACKAGE} reported no tarball`);
  if (info.integrity !== CODEX_INTEGRITY) throw new Error(`npm pack ${CODEX_PACKAGE}: integrity ${info.integrity}, pinned ${CODEX_INTEGRITY}`);
  return join(dest, info.filename);
}

/**
 * Debian bookworm minbase (bash, coreutils: the shell Codex runs its commands in) plus the Codex
 * CLI from its npm tarball: a real third-party coding agent that takes an OpenAI-compatible base
 * URL, run as a plan step through the model gateway.
 */
export const codex: ImageDefinition = {
  name: 'codex',
  folder,
  cmd: ['/bin/bash'],
  mtime: SOURCE_DATE_EPOCH,
  async hashInputs() {
    return [`source-date-epoch=${SOURCE_DATE_EPOCH}`, `npm=${CODEX_PACKAGE}`, `integrity=${CODEX_INTEGRITY}`];
  },
  async buildRootfs(dir, { signal, progress }) {
    progress('mmdebstrap bookworm minbase');
    await execa('mmdebstrap', ['--mode=root', '--variant=minbase', 'bookworm', dir], {
      cancelSignal: signal,
      env: { SOURCE_DATE_EPOCH: String(SOURCE_DATE_EPOCH) },
      forceKillAfterDelay: 30_000,
    });
    for (const entry of await readdir(join(dir, 'dev'))) await removeTree(join(dir, 'dev', entry));
    await appendBerthAccount(dir, '/bin/bash');
    await makeStandardDirs(dir);
    const work = await mkdtemp(join(tmpdir(), 'berth-codex-pack-'));
    try {
      progress(`npm pack ${CODEX_PACKAGE}`);
      const tarball = await packCodex(work, signal);
      await execa('tar', ['-xzf', tarball, '-C', work, ...BINARIES.map(([p]) => p)], { cancelSignal: signal });
      const bin = join(dir, 'usr/local/bin');
      await mkdir(bin, { recursive: true });
      for (const [inTarball, name] of BINARIES) {
        await copyFile(join(work, inTarball), join(bin, name));
        await chmod(join(bin, name), 0o755);
      }
    } finally {
      await removeTree(work);
    }
  },
};
