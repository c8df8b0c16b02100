import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterEach } from 'vitest';
import { openStore, openSqliteStore, type Store } from '../../host/store';
import { startPostgres, type TestPostgres } from './postgres';

/** The two store implementations every store-level suite runs against. */
export const STORE_KINDS = ['sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

let cluster: Promise<TestPostgres> | undefined;
/** One PostgreSQL cluster per test process, started on first use. */
export function sharedPostgres(): Promise<TestPostgres> {
  return (cluster ??= startPostgres());
}
/** Stops the process's cluster, if one was started (call from `afterAll`). */
export async function stopSharedPostgres(): Promise<void> {
  if (!cluster) return;
  const c = await cluster;
  cluster = undefined;
  await c.stop();
}

/** A fresh empty store location of `kind`: a file path in a new temp dir, or a new database's URL. */
export async function newStoreLocation(kind: StoreKind): Promise<{ location: string; cleanup(): void }> {
  if (kind === 'postgres') return { location: await (await sharedPostgres()).createStoreDatabase(), cleanup() {} };
  const dir = mkdtempSync(join(tmpdir(), 'berth-test-'));
  return { location: join(dir, 'berth.db'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Raw SQL on a store, as another program would run it (tests only: counting rows, bypassing the port). */
export async function rawSql(store: Store, text: string): Promise<Array<Record<string, unknown>>> {
  const s = store as Store & { db?: import('better-sqlite3').Database; pool?: pg.Pool };
  if (s.pool) return (await s.pool.query(text)).rows;
  const stmt = s.db!.prepare(text);
  return stmt.reader ? (stmt.all() as Array<Record<string, unknown>>) : (stmt.run(), []);
}

/** A fresh store of `kind`; `open()` gives another handle on the same store (as a second host would). */
export async function tempStoreOf(kind: StoreKind) {
  const loc = await newStoreLocation(kind);
  const handles: Store[] = [];
  const open = async () => {
    const s = kind === 'sqlite' ? openSqliteStore(loc.location) : await openStore(loc.location);
    handles.push(s);
    return s;
  };
  const store = await open();
  return {
    kind,
    location: loc.location,
    store,
    open,
    async cleanup() {
      for (const h of handles) await h.close();
      loc.cleanup();
    },
  };
}

/**
 * For a suite's tests: `fresh()` gives a new store of `kind` ({@link tempStoreOf}), closed and
 * removed after the test that made it (registers its own `afterEach`).
 */
export function freshStores(kind: StoreKind): () => Promise<Awaited<ReturnType<typeof tempStoreOf>>> {
  const open: Array<Awaited<ReturnType<typeof tempStoreOf>>> = [];
  afterEach(async () => {
    for (const t of open.splice(0)) await t.cleanup();
  });
  return async () => {
    const t = await tempStoreOf(kind);
    open.push(t);
    return t;
  };
}
