import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pack } from 'tar-stream';
import { isBerthError } from '../../host/errors';
import { extractArchive } from '../../host/sandbox/archive-extract';
import { describe, expect, test } from '../support/sandbox-fixture';

const code = (p: Promise<unknown>) => p.then(() => 'resolved', (e: unknown) => (isBerthError(e) ? e.code : String(e)));

describe('sandbox files', () => {
  test('writeFile then readFile round-trips bytes, sets the mode and the owner, and creates parents', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const data = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 256));
    await lease.writeFile('deep/er/file.bin', data, { mode: 0o640 });
    expect((await lease.readFile('/workspace/deep/er/file.bin')).equals(data)).toBe(true);
    const ls = await lease.exec('stat -c "%u:%g %a" deep deep/er deep/er/file.bin');
    expect(ls.stdout).toBe('1000:1000 755\n1000:1000 755\n1000:1000 640\n');
    await lease.writeFile('deep/er/file.bin', 'replaced');
    expect((await lease.readFile('deep/er/file.bin')).toString()).toBe('replaced');
  });

  test('a path through a regular file is not_a_directory, a missing one not_found', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    await lease.writeFile('plain', 'x');
    await lease.exec('ln -s plain plain-link');
    expect(await code(lease.readFile('plain/inner'))).toBe('not_a_directory');
    expect(await code(lease.writeFile('plain/inner', 'y'))).toBe('not_a_directory');
    expect(await code(lease.readFile('plain-link/inner'))).toBe('not_a_directory');
    expect(await code(lease.readFile('missing/inner'))).toBe('not_found');
    expect(await code(lease.list('plain'))).toBe('not_a_directory');
    expect(await code(lease.readFile('.'))).toBe('not_a_file');
  });

  test('list reports names, types and sizes of one directory', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    // `$(...)` drops trailing newlines: the names end in a dot that is then taken off.
    await lease.exec(`a=$(printf 'e\\n\\nx\\n.'); n=$(printf 'n\\n.'); mkdir d "\${a%.}"; printf 12345 > f; ln -s f l; touch "with space" "\${n%.}"`);
    const entries = await lease.list('.');
    // A name ending in a newline, or holding two in a row, is kept whole (before: 'e\nx' and 'n').
    expect(entries.map((e) => [e.name, e.type])).toEqual([
      ['d', 'dir'],
      ['e\n\nx\n', 'dir'],
      ['f', 'file'],
      ['l', 'symlink'],
      ['n\n', 'file'],
      ['with space', 'file'],
    ]);
    expect(entries.find((e) => e.name === 'f')!.size).toBe(5);
  });

  test('paths that climb out of the workspace are refused as path_escape before any engine call', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    expect(await code(lease.readFile('../etc/passwd'))).toBe('path_escape');
    expect(await code(lease.readFile('/etc/passwd'))).toBe('path_escape');
    expect(await code(lease.readFile('a/../../etc/passwd'))).toBe('path_escape');
    expect(await code(lease.writeFile('../../tmp/x', 'x'))).toBe('path_escape');
    expect(await code(lease.list('/workspace/..'))).toBe('path_escape');
    expect(await code(lease.downloadDir('..', join(sandbox.dir, 'out')))).toBe('path_escape');
    expect(await code(lease.uploadDir(sandbox.dir, '/'))).toBe('path_escape');
    // Inside after normalisation is fine.
    await lease.writeFile('a/../ok.txt', 'ok');
    expect((await lease.readFile('ok.txt')).toString()).toBe('ok');
  });

  test('a symlink in the workspace pointing to /etc cannot be read, written or listed through', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    await lease.exec('ln -s /etc etc-link; ln -s /etc/passwd passwd-link; ln -s ../.. up; mkdir d; ln -s ../../etc d/sneaky');
    expect(await code(lease.readFile('etc-link/passwd'))).toBe('path_escape');
    expect(await code(lease.readFile('passwd-link'))).toBe('path_escape');
    expect(await code(lease.readFile('up/etc/passwd'))).toBe('path_escape');
    expect(await code(lease.readFile('d/sneaky/passwd'))).toBe('path_escape');
    expect(await code(lease.writeFile('etc-link/evil', 'x'))).toBe('path_escape');
    expect(await code(lease.writeFile('passwd-link', 'x'))).toBe('path_escape');
    expect(await code(lease.list('etc-link'))).toBe('path_escape');
    expect((await lease.exec('cat /etc/passwd | grep -c evil; ls /etc/evil 2>&1')).stdout).toMatch(/^0\n.*No such file/);
    // A symlink that stays inside is followed.
    await lease.exec('mkdir real; echo inside > real/f; ln -s real alias; ln -s /workspace/real/f abs-inside');
    expect((await lease.readFile('alias/f')).toString()).toBe('inside\n');
    expect((await lease.readFile('abs-inside')).toString()).toBe('inside\n');
    await lease.writeFile('alias/g', 'through');
    expect((await lease.exec('cat real/g')).stdout).toBe('through');
  });

  test('uploadDir and downloadDir round-trip a tree with an inner symlink, owned by the workspace owner', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const src = join(sandbox.dir, 'src');
    mkdirSync(join(src, 'a/b'), { recursive: true });
    writeFileSync(join(src, 'top.txt'), 'top');
    writeFileSync(join(src, 'a/b/deep.txt'), 'deep');
    writeFileSync(join(src, 'empty'), '');
    symlinkSync('a/b/deep.txt', join(src, 'link'));
    const up = await lease.uploadDir(src, 'proj/src');
    expect(up.files).toBe(3);
    expect((await lease.exec('cd proj/src && cat top.txt link && stat -c %u:%g . a/b/deep.txt && readlink link')).stdout).toBe('topdeep1000:1000\n1000:1000\na/b/deep.txt\n');
    await lease.exec('cd proj/src && echo made-inside > a/new.txt && ln -s /workspace/proj/src/top.txt abs-link');
    const out = join(sandbox.dir, 'out');
    await lease.downloadDir('proj/src', out);
    expect(readFileSync(join(out, 'a/b/deep.txt'), 'utf8')).toBe('deep');
    expect(readFileSync(join(out, 'a/new.txt'), 'utf8')).toBe('made-inside\n');
    expect(readlinkSync(join(out, 'link'))).toBe('a/b/deep.txt');
    // An absolute link inside the downloaded tree comes out relative.
    expect(readlinkSync(join(out, 'abs-link'))).toBe('top.txt');
    expect(readFileSync(join(out, 'empty'), 'utf8')).toBe('');
  });

  test('uploadDir refuses a host symlink that points outside the uploaded directory', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const src = join(sandbox.dir, 'bad-src');
    mkdirSync(src);
    writeFileSync(join(src, 'ok.txt'), 'ok');
    symlinkSync('/etc/passwd', join(src, 'abs'));
    expect(await code(lease.uploadDir(src, 'up'))).toBe('path_escape');
    const src2 = join(sandbox.dir, 'bad-src2');
    mkdirSync(join(src2, 'sub'), { recursive: true });
    symlinkSync('../../outside', join(src2, 'sub/rel'));
    expect(await code(lease.uploadDir(src2, 'up'))).toBe('path_escape');
    expect((await lease.exec('ls up 2>&1')).exitCode).not.toBe(0);
  });

  test('downloadDir refuses a tree whose symlink leads out of it and leaves nothing behind', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    await lease.exec('mkdir -p t/x && echo hi > t/x/f && ln -s /etc/passwd t/x/evil');
    const out = join(sandbox.dir, 'dl1');
    expect(await code(lease.downloadDir('t', out))).toBe('path_escape');
    expect(existsSync(out)).toBe(false);
    await lease.exec('rm t/x/evil && ln -s ../../.. t/x/up');
    expect(await code(lease.downloadDir('t', out))).toBe('path_escape');
    expect(existsSync(out)).toBe(false);
  });

  test('a malicious archive (absolute name, .., symlink and hard link escapes, link chains) is refused', async ({ sandbox }) => {
    const cases: Array<Array<{ name: string; type?: 'file' | 'symlink' | 'link' | 'directory'; linkname?: string }>> = [
      [{ name: 'root/ok' }, { name: '/etc/cron.d/evil' }],
      [{ name: 'root/../../evil' }],
      [{ name: 'root/evil', type: 'symlink', linkname: '/etc/passwd' }],
      [{ name: 'root/evil', type: 'symlink', linkname: '../../../etc' }],
      [{ name: 'root/evil', type: 'link', linkname: '../etc/passwd' }],
      [{ name: 'root/evil', type: 'link', linkname: '/etc/passwd' }],
      // Each link alone stays inside; followed through each other they leave.
      [{ name: 'root/a', type: 'symlink', linkname: '.' }, { name: 'root/b', type: 'symlink', linkname: 'a/../x' }],
      [{ name: 'root/s', type: 'symlink', linkname: 'd' }, { name: 'root/s/f' }],
    ];
    for (const [i, entries] of cases.entries()) {
      const p = pack();
      for (const e of entries) {
        const isFile = (e.type ?? 'file') === 'file';
        p.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname, size: isFile ? 1 : 0 }, isFile ? 'x' : '');
      }
      p.finalize();
      const target = join(sandbox.dir, `mal-${i}`);
      mkdirSync(target);
      const err = await extractArchive(Readable.from(p as unknown as AsyncIterable<Buffer>), target, { strip: 1, sourceRoot: '/workspace/root' }).catch((e: unknown) => e);
      expect(isBerthError(err, 'path_escape'), `case ${i}: ${String(err)}`).toBe(true);
      expect(existsSync('/etc/cron.d/evil')).toBe(false);
      for (const name of ['evil', 'b', 'a']) {
        const st = lstatSync(join(target, name), { throwIfNoEntry: false });
        expect(st?.isSymbolicLink() ?? false, `case ${i}: ${name} was created`).toBe(false);
      }
    }
  });

  test('writeFile refuses to take the layer over the disk limit', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec({ resources: { diskMb: 8 } }), { sessionId: 's' });
    expect(await code(lease.writeFile('big', Buffer.alloc(9 * 1024 * 1024)))).toBe('disk_limit');
    await lease.writeFile('small', Buffer.alloc(1024 * 1024));
  });
});
