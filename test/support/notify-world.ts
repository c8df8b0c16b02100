import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { openStore, type Store } from '../../host/store';
import { bundleScript } from './bundle-script';
import { runNode, type ChildEnd } from './child';
import { invariantGuard } from './invariant-check';
import { sharedPostgres, stopSharedPostgres, type StoreKind } from './store-kinds';

/** The five operation ids of the notify example's job. */
export const OPS = [1, 2, 3, 4, 5].map((i) => `notice-2026-10-${i}`);

/** Opens the store at `db` for one read and closes it. */
export async function read<T>(db: string, f: (s: Store) => Promise<T>): Promise<T> {
  const s = await openStore(db);
  try {
    return await f(s);
  } finally {
    await s.close();
  }
}

/**
 * The notify example's world for a test file: its job bundled as a script (a child a test can
 * SIGKILL), fresh stores, and `berth check` over every SQLite store a test made. Registers the
 * file's hooks: call it once at the top of a test file.
 */
export function notifyWorld() {
  let script = '';
  const dirs: string[] = [];
  const newDb = () => {
    const d = mkdtempSync(join(tmpdir(), 'berth-notify-'));
    dirs.push(d);
    return { dir: d, db: join(d, 'notify.db') };
  };
  // Every run each test created keeps the run invariants (issue 17: berth check over every store it made).
  let checked = 0;
  afterEach(async () => {
    const fresh = dirs.slice(checked);
    checked = dirs.length;
    for (const d of fresh) {
      const db = join(d, 'notify.db');
      if (!existsSync(db)) continue;
      const broken = await invariantGuard().check(db);
      if (broken) throw broken;
    }
  });
  beforeAll(async () => {
    script = await bundleScript(join(process.cwd(), 'examples', 'notify', 'run-notify.ts'));
  });
  afterAll(async () => {
    await stopSharedPostgres();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    if (script) rmSync(script, { force: true });
  });
  return {
    newDb,
    /** As newDb, with the store on `kind`: the file there, or a fresh PostgreSQL database. */
    newStore: async (kind: StoreKind) => {
      const d = newDb();
      return kind === 'postgres' ? { dir: d.dir, db: await (await sharedPostgres()).createStoreDatabase('notify') } : d;
    },
    /** Runs the notify job as a child process. */
    run: (args: string[], env?: Record<string, string>): Promise<ChildEnd> => runNode(script, args, env),
  };
}
