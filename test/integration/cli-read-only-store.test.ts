import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChildEnd } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) {
    chmodSync(d, 0o755);
    rmSync(d, { recursive: true, force: true });
  }
  await fx?.cleanup();
  fx = undefined;
});

// Root writes any file whatever its mode: the CLI runs as `nobody` then, as an operator reading
// another user's (or a read-only mount's) store would.
const asReader = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};

// The owner of a shared store, when root runs the tests: another user than the reader (uid 65533
// needs no passwd entry; BERTH_OPERATOR names the actor).
const OWNER = 65533;
const asOwner = process.getuid?.() === 0 ? { uid: OWNER, gid: OWNER } : {};

function reader(args: string[], as: { uid?: number; gid?: number } = asReader, name = 'reader'): Promise<ChildEnd> {
  return cliAs(args, as, name);
}

async function cliAs(args: string[], as: { uid?: number; gid?: number }, name: string): Promise<ChildEnd> {
  const script = await bundledCli();
  return new Promise((resolve) => {
    execFile(process.execPath, [script, ...args], { ...as, env: { ...process.env, BERTH_OPERATOR: name }, timeout: 120_000 }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: number | string }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, signal: null, stdout, stderr });
    });
  });
}

/**
 * A copy of the store in a directory nobody may write, the file read-only too, with no WAL file
 * beside it (as a cleanly closed store is left): in WAL mode as Berth keeps it, or in SQLite's
 * default rollback mode (a copy made with `sqlite3 .backup` or VACUUM INTO).
 */
function readOnlyCopy(from: string, journal: 'wal' | 'delete', edit?: (db: Database.Database) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-ro-'));
  dirs.push(dir);
  const file = join(dir, 'berth.db');
  const db = new Database(from);
  try {
    db.prepare('VACUUM INTO ?').run(file);
  } finally {
    db.close();
  }
  const e = new Database(file);
  try {
    edit?.(e);
    e.pragma(`journal_mode = ${journal}`);
  } finally {
    e.close();
  }
  chmodSync(file, 0o444);
  chmodSync(dir, 0o555);
  return file;
}

describe('a store this user cannot write', { timeout: 300_000 }, () => {
  it('reads a read-only store: status, show, logs, export, check and tree work; a command that writes says the store is read-only', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    const store = readOnlyCopy(fx.store, 'wal');

    // Before: every one failed with "store_open_failed: cannot open store ...: attempt to write a
    // readonly database" (a rollback-mode copy: "internal error: attempt to write a readonly database").
    for (const s of [store, readOnlyCopy(fx.store, 'delete')]) {
      for (const args of [['status'], ['show', runId], ['logs', runId], ['check', runId], ['tree', runId]]) {
        const r = await reader([...args, '--store', s]);
        expect(r.code, `${args[0]}: ${r.stderr}`).toBe(0);
      }
    }
    expect((await reader(['logs', runId, '--store', store])).stdout).toContain('one');
    const exported = await reader(['export', runId, '--store', store]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(JSON.parse(exported.stdout)).toMatchObject({ format: 'berth.run-record', run: { id: runId } });

    const write = await reader(['accept', runId, '--store', store, '--json']);
    expect(write.code).toBe(1);
    const err = JSON.parse(write.stderr) as { error: { code: string; message: string; details: { path: string } } };
    expect(err.error.code).toBe('store_read_only');
    expect(err.error.message).toContain(store);
    expect(err.error.message).toContain('berth accept');
    expect(err.error.details.path).toBe(store);
  });

  it('says a read-only store written by an older berth needs its schema brought up to date, instead of failing on the write', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const store = readOnlyCopy(fx.store, 'wal', (db) => db.prepare('DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)').run());
    const r = await reader(['status', '--store', store, '--json']);
    expect(r.code).toBe(1);
    const err = JSON.parse(r.stderr) as { error: { code: string; message: string } };
    expect(err.error.code).toBe('store_read_only');
    expect(err.error.message).toMatch(/schema/);
    expect(err.error.message).not.toContain('attempt to write');
  });

  it('says a new store cannot be created in a directory this user cannot write, and that a read-only file with no Berth tables is no store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-ro-'));
    dirs.push(dir);
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    chmodSync(empty, 0o444);
    chmodSync(dir, 0o555);
    const created = await reader(['run', join(dir, 'plan.yaml'), '--json', '--store', join(dir, 'new.db')]);
    // Before: "internal error: EACCES: permission denied, open '.../new.db'".
    expect(created.code).toBe(1);
    expect(JSON.parse(created.stderr).error).toMatchObject({ code: 'store_open_failed', message: expect.stringContaining(`cannot create store ${join(dir, 'new.db')}: this user may not write ${dir}`) });
    const none = await reader(['status', '--json', '--store', empty]);
    // Before: store_read_only "... its schema is older than this berth reads (it needs schema version(s) 1, 2, ...".
    expect(none.code).toBe(1);
    expect(JSON.parse(none.stderr).error).toMatchObject({ code: 'store_not_berth', message: expect.stringContaining(`${empty} is not a Berth store: it holds no tables`) });
  });
  it('a reader in a directory it may write leaves no -wal or -shm file behind, so the store\'s owner writes next as before', async ({ skip }) => {
    if (process.getuid?.() !== 0) skip();
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    // The owner's store, readable by all, in a directory everybody may write (a shared folder).
    const dir = mkdtempSync(join(tmpdir(), 'berth-shared-'));
    dirs.push(dir);
    const store = join(dir, 'berth.db');
    const db = new Database(fx.store);
    try {
      db.prepare('VACUUM INTO ?').run(store);
    } finally {
      db.close();
    }
    // In WAL mode, as Berth keeps a store (a VACUUM INTO copy is in rollback mode).
    const copy = new Database(store);
    copy.pragma('journal_mode = wal');
    copy.close();
    chownSync(store, OWNER, OWNER);
    chmodSync(store, 0o644);
    chmodSync(dir, 0o777);

    for (const args of [['status'], ['show', runId], ['export', runId]]) {
      const r = await reader([...args, '--store', store]);
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(0);
    }
    // Before: berth.db-shm and berth.db-wal, the reader's, mode 0644, and the owner's next write
    // failed: "internal error: attempt to write a readonly database".
    expect(readdirSync(dir)).toEqual(['berth.db']);
    const wrote = await reader(['reject', runId, '--reason', 'shared', '--store', store], asOwner, 'owner');
    expect(wrote.code, wrote.stderr).toBe(0);

    // Files such a reader of an older berth left: the owner is told what they are and what to do.
    for (const f of [`${store}-wal`, `${store}-shm`]) {
      writeFileSync(f, '');
      chownSync(f, 65534, 65534);
      chmodSync(f, 0o644);
    }
    const refused = await reader(['accept', runId, '--store', store, '--json'], asOwner, 'owner');
    expect(refused.code).toBe(1);
    const err = (JSON.parse(refused.stderr) as { error: { code: string; message: string } }).error;
    expect(err.code).toBe('store_read_only');
    expect(err.message).toContain(`remove ${store}-wal and ${store}-shm`);
    expect((await reader(['show', runId, '--store', store], asOwner, 'owner')).code).toBe(0);
    rmSync(`${store}-wal`);
    rmSync(`${store}-shm`);
    const after = await reader(['accept', runId, '--store', store], asOwner, 'owner');
    expect(after.code, after.stderr).toBe(0);
    expect(existsSync(`${store}-wal`)).toBe(false);
  });
});
