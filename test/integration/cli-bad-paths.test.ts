import { readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../host/store';
import { runNode } from '../support/child';
import { bundledCli } from '../support/plan-fixture';

let dir = '';
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = '';
});

const errorOf = (stderr: string) => (JSON.parse(stderr) as { error: { code: string; message: string } }).error;

describe('a path that names the wrong kind of thing', () => {
  it('is said in words for berth import (a directory, a missing file, JSON that is no record) and for --store (a directory), and nothing is created', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-bad-paths-'));
    const store = join(dir, 'berth.db');
    await (await openStore(store)).close();
    const cli = await bundledCli();
    const importing = async (file: string) => errorOf((await runNode(cli, ['import', file, '--json', '--store', store])).stderr);

    // Before: "cannot read DIR: EISDIR: illegal operation on a directory, read".
    expect(await importing(dir)).toMatchObject({ code: 'record_unreadable', message: `cannot read ${dir}: it is a directory, not a record file (berth export RUN --out FILE writes one)`, retryable: false });
    // Before: "ENOENT: no such file or directory, open '...'".
    expect(await importing(join(dir, 'none.json'))).toMatchObject({ code: 'record_unreadable', message: `cannot read ${join(dir, 'none.json')}: it does not exist` });
    // Before: record_version_unknown, "has format undefined", as if it were a record of another version.
    writeFileSync(join(dir, 'other.json'), '{"name":"not a record"}');
    expect(await importing(join(dir, 'other.json'))).toMatchObject({ code: 'record_unreadable', message: `${join(dir, 'other.json')} is not a run record: it has no "format" field (a record from berth export has "format": "berth.run-record")` });
    // A record of another format is still a version question.
    writeFileSync(join(dir, 'future.json'), '{"format":"berth.run-record.v9"}');
    expect(await importing(join(dir, 'future.json'))).toMatchObject({ code: 'record_version_unknown' });

    // Before: "cannot open store DIR: unable to open database file".
    for (const args of [['status'], ['run', join(dir, 'plan.yaml')]]) {
      const r = await runNode(cli, [...args, '--json', '--store', dir]);
      expect(r.code, r.stderr).toBe(1);
      expect(errorOf(r.stderr)).toMatchObject({ code: 'store_open_failed', message: `cannot open store ${dir}: it is a directory; a store is a SQLite file (such as ${join(dir, 'berth.db')}) or a postgres:// URL` });
    }
    expect(readdirSync(dir).filter((f) => !f.startsWith('berth.db')).sort()).toEqual(['future.json', 'other.json']);
  });

  it('--store naming a device (/dev/null) is store_open_failed saying it is no regular file, for a command that reads and one that creates', async () => {
    const cli = await bundledCli();
    for (const args of [['status'], ['run', 'plan.yaml']]) {
      const r = await runNode(cli, [...args, '--json', '--store', '/dev/null']);
      // Before: "internal error: database is locked".
      expect(r.code, r.stderr).toBe(1);
      expect(errorOf(r.stderr)).toMatchObject({ code: 'store_open_failed', message: 'cannot open store /dev/null: it is not a regular file (a character device); a store is a SQLite file or a postgres:// URL' });
    }
  });

  it('refuses a --port out of range for berth serve and berth mcp --http as a usage error (was an internal error from listen)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-bad-port-'));
    const store = join(dir, 'berth.db');
    await (await openStore(store)).close();
    const cli = await bundledCli();
    for (const args of [['serve'], ['mcp', '--http']]) {
      for (const port of ['99999', '65536', '80x']) {
        const r = await runNode(cli, [...args, '--port', port, '--store', store]);
        expect(r.code, `${args.join(' ')} --port ${port}: ${r.stderr}`).toBe(2);
        expect(r.stderr.trim()).toBe(`berth: usage: --port expects a port number from 0 (any free port) to 65535, found "${port}"`);
      }
    }
  });
  it('berth env lock of a manifest that does not exist or is a directory says so as env validate does (was an internal error, ENOENT)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-bad-paths-'));
    const cli = await bundledCli();
    for (const [file, code, says] of [
      [join(dir, 'none.yaml'), 'manifest_not_found', 'does not exist'],
      [dir, 'manifest_unreadable', 'it is a directory'],
    ] as const) {
      const r = await runNode(cli, ['env', 'lock', file, '--json']);
      expect(r.code).toBe(1);
      expect(errorOf(r.stderr)).toMatchObject({ code, message: expect.stringContaining(says) });
      expect(readdirSync(dir)).toEqual([]);
    }
  });
});
