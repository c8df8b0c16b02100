import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { lastJson, planFixture } from '../support/plan-fixture';

type Summary = { run: Run };
const errorOf = (stderr: string) => (JSON.parse(stderr.trim().split('\n').pop()!) as { error: { code: string; message: string; retryable: boolean } }).error;

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let locker: Database.Database | undefined;
afterEach(async () => {
  if (locker?.inTransaction) locker.exec('ROLLBACK');
  locker?.close();
  locker = undefined;
  await fx?.cleanup();
  fx = undefined;
});

// A host frozen in the middle of a write (SIGSTOP, a suspended VM) holds the SQLite file's write
// lock; here another process (this test's) holds it the same way, with a transaction left open.
describe('a SQLite store whose write lock another process holds', { timeout: 120_000 }, () => {
  it('refuses a command that writes as store_busy naming the store, retryable, not as an internal error, and writes nothing', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one > one.txt' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;

    locker = new Database(fx.store);
    locker.exec('BEGIN EXCLUSIVE');
    for (const args of [['accept', runId], ['fork', runId, '--at', 'upload', '--detach'], ['resume', runId]]) {
      const r = await fx.cli([...args, '--json']);
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(1);
      const err = errorOf(r.stderr);
      expect(err.code, `${args[0]}: ${r.stderr}`).toBe('store_busy');
      expect(err.retryable).toBe(true);
      expect(err.message).toContain(fx.store);
      expect(err.message).toMatch(/write lock/);
    }
    locker.exec('ROLLBACK');

    // Nothing of the refused commands was written: no fork, no verdict; once the lock is let go, the same command works.
    expect((await fx.read((s) => s.listRuns())).map((r) => r.id)).toEqual([runId]);
    const accepted = await fx.cli(['accept', runId, '--json']);
    expect(accepted.code, accepted.stderr).toBe(0);
  });
});
