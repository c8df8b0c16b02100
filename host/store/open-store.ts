import { resolve } from 'node:path';
import type { Clock } from '../support/clock';
import { openPostgresStore } from './postgres/postgres-store';
import { openSqliteStore } from './sqlite/sqlite-store';
import type { Store } from './store';

/** True for a `postgres://` or `postgresql://` URL; anything else is a SQLite file path. */
export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/**
 * Opens the store a location names: a PostgreSQL URL (several hosts on one database) or a SQLite
 * file path (one machine; the default). Both bring their schema up to date and refuse a store of
 * a newer Berth.
 */
export async function openStore(location: string, opts: { clock?: Clock } = {}): Promise<Store> {
  if (isPostgresUrl(location)) return openPostgresStore(location, opts);
  return openSqliteStore(resolve(location), opts);
}
