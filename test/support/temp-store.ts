import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { openSqliteStore, openStore, type Store } from '../../host/store';
import { DocumentTypes, HandlerRegistry, Kernel } from '../../host/kernel';
import { systemClock } from '../../host/support';

/** A fresh SQLite file in its own temp directory; `cleanup` removes both. */
export function tempStore(name = 'berth.db') {
  const dir = mkdtempSync(join(tmpdir(), 'berth-test-'));
  const path = join(dir, name);
  const store = openSqliteStore(path);
  return {
    dir,
    path,
    store,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Opens the store (a file path or a postgres:// URL) for one read and closes it again, as another process would look at it. */
export async function readStore<T>(path: string, fn: (s: Store) => Promise<T>): Promise<T> {
  const s = await openStore(path);
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

export const quietLogger = () => pino({ level: process.env.BERTH_TEST_LOG ?? 'silent' });

/** A kernel over a temp store with its registries, not yet started. */
export function tempKernel(opts: { concurrency?: number } = {}) {
  const t = tempStore();
  const registry = new HandlerRegistry();
  const documents = new DocumentTypes();
  const kernel = new Kernel({
    store: t.store,
    registry,
    documents,
    clock: systemClock,
    logger: quietLogger(),
    hostId: 'test-host',
    pollMs: 50,
    concurrency: opts.concurrency,
  });
  return {
    ...t,
    registry,
    documents,
    kernel,
    async cleanup() {
      await kernel.stop();
      await t.cleanup();
    },
  };
}
