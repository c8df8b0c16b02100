import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collect, packHostDir, scanHostDir } from '../../host/sandbox/archive-pack';

let dir = '';
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = '';
});

describe('a host workspace with names that are not UTF-8', () => {
  it('is refused by the offending name, shown with \\x escapes, for a file deep in the tree and for a link target (was an internal ENOENT: the name read as text names no file)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-upload-names-'));
    mkdirSync(join(dir, 'src', 'ünï'), { recursive: true });
    writeFileSync(join(dir, 'src', 'ünï', 'ok.txt'), 'fine');
    writeFileSync(Buffer.concat([Buffer.from(join(dir, 'src', 'ünï') + '/'), Buffer.from([0x62, 0xff, 0x2e, 0x63])]), 'x');
    await expect(scanHostDir(dir)).rejects.toMatchObject({
      code: 'upload_unrepresentable',
      message: `src/ünï/b\\xff.c in ${dir}: a name that is not UTF-8 cannot be uploaded into the sandbox; rename it`,
      details: { path: 'src/ünï/b\\xff.c' },
    });
    await rm(join(dir, 'src'), { recursive: true });

    symlinkSync(Buffer.from([0x74, 0xfe]), join(dir, 'lnk'));
    await expect(scanHostDir(dir)).rejects.toMatchObject({ code: 'upload_unrepresentable', message: `symlink lnk in ${dir} points at a name that is not UTF-8 (t\\xfe): it cannot be uploaded into the sandbox; change it` });
    await rm(join(dir, 'lnk'));

    // UTF-8 names, a newline in one included, are uploaded as they are.
    writeFileSync(join(dir, 'a\nb'), 'nl');
    writeFileSync(join(dir, 'ünï'), 'u');
    const { entries } = await scanHostDir(dir);
    expect(entries.map((e) => e.rel)).toEqual(['a\nb', 'ünï']);
  });
});

describe('a host workspace that changes while it is packed', () => {
  it('refuses a file swapped for a fifo after the scan, at once, instead of waiting for a writer that never comes', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-upload-fifo-'));
    writeFileSync(join(dir, 'a.txt'), 'a');
    writeFileSync(join(dir, 'b.txt'), 'b');
    const { entries } = await scanHostDir(dir);
    rmSync(join(dir, 'b.txt'));
    execFileSync('mkfifo', [join(dir, 'b.txt')]);
    // Before: opening the fifo for reading waited for a writer (the test timed out).
    await expect(collect(packHostDir(dir, entries, ['workspace'], { uid: 1000, gid: 1000 }))).rejects.toMatchObject({ code: 'path_escape', message: 'host file b.txt changed during upload' });
  }, 10_000);
});
