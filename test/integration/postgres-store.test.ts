import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { isBerthError } from '../../host/errors';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import { NEWEST_SCHEMA_VERSION, SCHEMA_VERSIONS, openPostgresStore, type CommitInput, type Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { bundledCli } from '../support/plan-fixture';
import { startPostgres, type TestPostgres } from '../support/postgres';

// The PostgreSQL store against a real server this file starts: connections killed by the server,
// and the refusals an operator meets with a wrong URL or a database of a newer Berth.
let pgc: TestPostgres;
beforeAll(async () => {
  pgc = await startPostgres();
}, 120_000);
afterAll(async () => {
  await pgc?.stop();
}, 60_000);

const dbName = (url: string) => new URL(url).pathname.slice(1);
const count = async (url: string, table: string) => Number((await pgc.sql<{ c: string }>(`SELECT COUNT(*) AS c FROM ${table}`, [], dbName(url)))[0]!.c);

/** Waits until a backend of `url`'s database waits for a row lock, and returns its pid. */
async function lockWaiter(url: string): Promise<number> {
  for (let waited = 0; waited < 30_000; waited += 50) {
    const rows = await pgc.sql<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
      [dbName(url)],
    );
    if (rows[0]) return rows[0].pid;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no backend ever waited for the lock');
}

/** Holds a row lock on one task from a separate superuser connection until `release()`. */
async function holdTaskLock(url: string, taskId: string) {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: pgc.url(dbName(url)) });
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT id FROM tasks WHERE id = $1 FOR UPDATE', [taskId]);
  return { release: async () => (await client.query('ROLLBACK'), await client.end()) };
}

const session = 'ses_1';
const seedInput: CommitInput = {
  sessionId: session,
  label: 'seed',
  createSession: {},
  runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: 'task_1', versions: {} }],
  tasks: [{ id: 'task_1', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'start', input: {} }],
};

describe('a PostgreSQL connection killed in the middle of a commit', { timeout: 120_000 }, () => {
  it('the commit is wholly out, the caller gets a retryable store_unavailable, and the next commit continues the gap-free sequence', async () => {
    const url = await pgc.createDatabase();
    const store = await openPostgresStore(url);
    try {
      expect((await store.commit(seedInput)).ok).toBe(true);
      const before = { commits: await count(url, 'commits'), entries: await count(url, 'entries'), effects: await count(url, 'effects') };
      const lock = await holdTaskLock(url, 'task_1');
      // The commit writes its commit row, an entry and an effect, then waits for the task row.
      const inFlight = store.commit({
        sessionId: session,
        label: 'doomed',
        entries: [{ id: 'e-doomed', kind: 'note', body: 'x' }],
        effects: [{ id: 'fx-doomed', create: { runId: 'run_1', taskId: 'task_1', kind: 'k', intent: {}, replay: 'never' } }],
        taskTransitions: [{ taskId: 'task_1', expectVersion: 1, set: { status: 'running' } }],
      });
      const outcome = inFlight.then(() => 'resolved', (e: unknown) => e);
      const pid = await lockWaiter(url);
      await pgc.sql('SELECT pg_terminate_backend($1)', [pid]);
      const err = await outcome;
      await lock.release();
      expect(isBerthError(err, 'store_unavailable')).toBe(true);
      expect((err as { retryable: boolean }).retryable).toBe(true);
      expect({ commits: await count(url, 'commits'), entries: await count(url, 'entries'), effects: await count(url, 'effects') }).toEqual(before);
      expect((await store.getTask('task_1'))?.status).toBe('pending');
      const next = await store.commit({ sessionId: session, label: 'after', taskTransitions: [{ taskId: 'task_1', expectVersion: 1, set: { status: 'running' } }] });
      expect(next).toMatchObject({ ok: true, seq: 2 });
    } finally {
      await store.close();
    }
  });

  it('a kernel whose phase commit lost its connection runs the phase again and completes the run, the lost commit leaving no trace', async () => {
    const url = await pgc.createDatabase();
    const store = await openPostgresStore(url);
    const registry = new HandlerRegistry();
    let releaseGate!: () => void;
    const gate = new Promise<void>((r) => (releaseGate = r));
    let finishes = 0;
    registry.register({
      kind: 'steps',
      version: 1,
      initialPhase: 'a',
      phases: {
        a: async () => ({ type: 'next', phase: 'b' }),
        b: async () => {
          await gate;
          finishes += 1;
          return { type: 'complete', result: { finishes } };
        },
      },
    });
    const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'pg-host', pollMs: 50 });
    try {
      await kernel.start();
      const { run } = await submit({ store, kernel, registry }, { requestId: 'req-kill', runKind: 'test', root: { kind: 'steps', input: {} } });
      const rootId = run.rootTaskId!;
      while ((await store.getTask(rootId))?.phase !== 'b') await new Promise((r) => setTimeout(r, 20));
      const lock = await holdTaskLock(url, rootId);
      releaseGate();
      await pgc.sql('SELECT pg_terminate_backend($1)', [await lockWaiter(url)]);
      await lock.release();
      const done = await kernel.waitForRun(run.id);
      expect(done.state).toBe('completed');
      // Had the killed commit landed, the task would have ended with finishes = 1 and phase b would not have run again.
      expect(finishes).toBe(2);
      expect((await store.getTask(rootId))?.result).toEqual({ finishes: 2 });
      const seqs = (await store.listCommits(run.sessionId)).map((c) => c.seq);
      expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    } finally {
      await kernel.stop();
      await store.close();
    }
  });
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return bundledCli().then(
    (script) =>
      new Promise((resolve) => {
        execFile(process.execPath, [script, ...args], { timeout: 60_000 }, (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr }),
        );
      }),
  );
}

describe('a PostgreSQL store the operator points at by mistake', { timeout: 120_000 }, () => {
  it('an unreachable server is a store_unreachable error naming the URL without its password', async () => {
    const url = `postgres://postgres:s3cr3t-unreachable@127.0.0.1:${pgc.port + 1}/nowhere`;
    const r = await cli(['status', '--store', url]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('store_unreachable');
    expect(r.stderr).toContain(`127.0.0.1:${pgc.port + 1}/nowhere`);
    expect(r.stderr).not.toContain('s3cr3t-unreachable');
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
  });

  it('a wrong password is a store_auth_failed error naming the URL, and nothing is written to the database', async () => {
    const url = await pgc.createDatabase();
    const wrong = url.replace(`:${pgc.password}@`, ':wrong-password-42@');
    const r = await cli(['status', '--store', wrong]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('store_auth_failed');
    expect(r.stderr).toContain(`/${dbName(url)}`);
    expect(r.stderr).not.toContain('wrong-password-42');
    const tables = await pgc.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'", [], dbName(url));
    expect(tables).toEqual([]);
  });

  it("another program's database is refused with store_not_berth naming its tables, and nothing is written (Berth's tables were added beside them)", async () => {
    const url = await pgc.createDatabase();
    await pgc.sql("CREATE TABLE invoices (id INT); INSERT INTO invoices VALUES (7)", [], dbName(url));
    const r = await cli(['status', '--store', url]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('store_not_berth');
    expect(r.stderr).toContain(`/${dbName(url)} is not a Berth store: it is another program's database (tables invoices); it was left as it was`);
    expect(r.stderr).not.toContain(pgc.password);
    await expect(openPostgresStore(url)).rejects.toSatisfy((e) => isBerthError(e, 'store_not_berth'));
    const tables = await pgc.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'", [], dbName(url));
    expect(tables).toEqual([{ tablename: 'invoices' }]);
  });

  it('a database of a newer Berth is refused with store_too_new naming both versions, and nothing is written', async () => {
    const url = await pgc.createDatabase();
    const first: Store = await openPostgresStore(url);
    await first.close();
    await pgc.sql("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from the future', 0)", [NEWEST_SCHEMA_VERSION + 5], dbName(url));
    const r = await cli(['status', '--store', url]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('store_too_new');
    expect(r.stderr).toContain(`schema version ${NEWEST_SCHEMA_VERSION + 5}, newer than this Berth (${NEWEST_SCHEMA_VERSION})`);
    expect(r.stderr).not.toContain(pgc.password);
    await expect(openPostgresStore(url)).rejects.toSatisfy((e) => isBerthError(e, 'store_too_new'));
    // Every known version once, and the future one: versions need not be contiguous (each helper's branch takes its own number).
    expect(await count(url, 'schema_migrations')).toBe(SCHEMA_VERSIONS.length + 1);
    expect(await count(url, 'sessions')).toBe(0);
  });
});
