import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openSqliteStore, type Store } from '../../host/store';

let dir: string | undefined;
let store: Store | undefined;
let other: Database.Database | undefined;
afterEach(async () => {
  other?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  other = store = dir = undefined;
});

it('a SQLite commit that finds another connection holding the write lock waits without freezing its process, and commits once the lock is free', async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-busy-'));
  const path = join(dir, 'berth.db');
  store = openSqliteStore(path);
  await store.commit({ sessionId: 's', label: 'init', createSession: {} });
  // Another writer (as another worker process would) holds the file's write lock.
  other = new Database(path);
  other.prepare('BEGIN IMMEDIATE').run();
  let settled = false;
  const pending = store.commit({ sessionId: 's', label: 'second' }).finally(() => (settled = true));
  // This process goes on meanwhile: timers run while the commit waits for the lock.
  let ticks = 0;
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 10)).then(() => ticks++);
  expect(ticks).toBe(5);
  expect(settled).toBe(false);
  other.prepare('COMMIT').run();
  const result = await pending;
  expect(result.ok && result.seq).toBe(2);
  expect((await store.listCommits('s')).map((c) => c.label)).toEqual(['init', 'second']);
});
