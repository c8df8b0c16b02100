import { resolve } from 'node:path';
import type { Clock } from '../support/clock';
import { redactUrl } from './postgres/open';
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

/**
 * A PostgreSQL store whose connection and migrations happen on first use, for the CLI's
 * synchronous composition root: every method waits for the open, and an open that failed
 * (unreachable server, wrong password, newer schema) rejects every call with that same typed error.
 */
export function lazyPostgresStore(url: string, opts: { clock?: Clock } = {}): Store {
  let opened: Promise<Store> | undefined;
  const ready = () => (opened ??= openPostgresStore(url, opts));
  const location = redactUrl(url);
  return new Proxy({} as Store, {
    get(_target, prop) {
      if (prop === 'location') return location;
      // A shared database is writable or refuses its user at the open: never read-only here.
      if (prop === 'readOnly') return false;
      // Not a thenable: `await store` must give the store, not wait for a method called `then`.
      if (prop === 'then' || typeof prop === 'symbol') return undefined;
      if (prop === 'close') return async () => (opened ? (await opened.catch(() => undefined))?.close() : undefined);
      return async (...args: unknown[]) => {
        const store = (await ready()) as unknown as Record<string, (...a: unknown[]) => unknown>;
        return store[prop]!(...args);
      };
    },
  });
}
