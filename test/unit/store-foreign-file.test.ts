import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

describe('a --store that names some other file', () => {
  it("refuses another program's SQLite database, naming its tables, and writes nothing to it (Berth's tables were added to it)", async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-foreign-'));
    const file = join(dir, 'app.db');
    const other = new Database(file);
    other.exec("CREATE TABLE users (id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'ada')");
    other.close();
    const before = readFileSync(file);
    expect(() => openSqliteStore(file)).toThrow(expect.objectContaining({ code: 'store_not_berth', message: `${file} is not a Berth store: it is another program's SQLite database (tables users); it was left as it was` }));
    expect(readFileSync(file).equals(before)).toBe(true);
    const again = new Database(file, { readonly: true });
    expect((again.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((r) => r.name)).toEqual(['users']);
    again.close();
  });

  it('refuses a file that is no database (a plan given as --store) by its path, and leaves it as it was (it was an internal "file is not a database")', () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-foreign-'));
    const file = join(dir, 'plan.yaml');
    const text = 'name: one\nenvironment: env.yaml\nsteps:\n  - { name: t, run: "true" }\n';
    writeFileSync(file, text);
    expect(() => openSqliteStore(file)).toThrow(expect.objectContaining({ code: 'store_not_berth', message: expect.stringContaining(`${file} is not a Berth store: it is not an SQLite database`) }));
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('makes an empty file a store, and opens a Berth store again', async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-foreign-'));
    const file = join(dir, 'empty.db');
    writeFileSync(file, '');
    const s = openSqliteStore(file);
    expect(await s.listRuns()).toEqual([]);
    await s.close();
    const t = openSqliteStore(file);
    expect(await t.listRuns()).toEqual([]);
    await t.close();
  });
});
