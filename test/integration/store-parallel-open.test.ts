import { execFile } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { SCHEMA_VERSIONS } from '../../host/store';
import { bundledCli } from '../support/plan-fixture';

const dir = mkdtempSync(join(tmpdir(), 'berth-parallel-open-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function berth(args: string[]): Promise<{ code: number; stderr: string }> {
  return bundledCli().then(
    (script) =>
      new Promise((resolve) => {
        execFile(process.execPath, [script, ...args], { timeout: 120_000 }, (err, _stdout, stderr) => {
          resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stderr });
        });
      }),
  );
}

describe('a store opened by many processes at once', () => {
  it('is migrated once when ten berth processes open it fresh together: every one succeeds, and each schema version is recorded once', async () => {
    // Two rounds of ten: before, 7 of 50 such openers failed ("duplicate column name: lease_until",
    // "table snapshots already exists"), at least one in most rounds.
    for (const round of [1, 2]) {
      const store = join(dir, `fresh-${round}.db`);
      // An empty file is a fresh store (what `berth run` creates before opening it), 0600 as it makes it.
      closeSync(openSync(store, 'a', 0o600));
      const ends = await Promise.all(Array.from({ length: 10 }, () => berth(['status', '--store', store, '--json'])));
      expect(ends.map((e) => (e.code === 0 ? 'ok' : e.stderr.slice(0, 300)))).toEqual(ends.map(() => 'ok'));
      const db = new Database(store, { readonly: true });
      try {
        const versions = (db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as Array<{ version: number }>).map((r) => r.version);
        expect(versions).toEqual(SCHEMA_VERSIONS.map((m) => m.version).sort((a, b) => a - b));
      } finally {
        db.close();
      }
    }
  });
});
