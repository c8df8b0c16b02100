import type pg from 'pg';

/**
 * The `pg` driver, loaded by the first pool: a SQLite host (every `berth run` on a laptop) never
 * pays its ~70 ms of module loading at process start.
 */
let driver: typeof pg | undefined;
import { BerthError } from '../../errors';
import { NEWEST_SCHEMA_VERSION, SCHEMA_VERSIONS, storeTooNew } from '../schema-versions';
import { pgStatementName } from '../commit/transaction';
import { loadModule } from '../../support/load-module';

/** A pool or one of its checked-out clients: both answer `query`. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;
export type Row = Record<string, unknown>;

const INT8 = 20;
// BIGINT columns hold epoch milliseconds, sequence numbers and counts, all far below 2^53, so a JS
// number is exact; pg's default (a string) would leak into every model object.
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8 ? (v: string) => Number(v) : driver!.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

const names = new Map<string, string>();

/**
 * Runs `text` as a named prepared statement: the name is derived from the text, so each
 * connection parses and plans a statement once and binds only values afterwards.
 */
export async function query<T extends Row = Row>(db: Queryable, text: string, values: unknown[] = []): Promise<T[]> {
  let name = names.get(text);
  if (!name) {
    // Bounded: a few texts carry a caller's number (a LIMIT), which would grow it without end.
    if (names.size >= 2000) names.clear();
    names.set(text, (name = pgStatementName(text)));
  }
  try {
    const res = await db.query<T>({ name, text, values });
    return res.rows;
  } catch (err) {
    throw storeError(err);
  }
}

/** The URL as it may appear in messages and logs: the password never does. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://(unparseable URL)';
  }
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);
/** SQLSTATEs after which the same work may simply be tried again. */
export const RETRY_CODES = new Set(['40001', '40P01']);

/**
 * A database failure as a typed error. Lost connections and a server shutting down or starting
 * (`57P01`-`57P03`, class `08`) are retryable: the transaction was rolled back by the server, or,
 * if the connection died while COMMIT was in flight, the caller re-reads before acting again.
 */
export function storeError(err: unknown): unknown {
  if (err instanceof BerthError) return err;
  const e = err as { code?: string; message?: string };
  const code = e.code ?? '';
  const message = e.message ?? String(err);
  if (CONNECTION_CODES.has(code) || code.startsWith('08') || code.startsWith('57P') || /Connection terminated|connection timeout|Client has encountered a connection error/i.test(message)) {
    return new BerthError('store_unavailable', `the PostgreSQL store is unreachable: ${message}`, { retryable: true, cause: err, details: { sqlstate: code } });
  }
  if (RETRY_CODES.has(code)) {
    return new BerthError('store_busy', `a concurrent transaction conflicted (${code}); try again`, { retryable: true, cause: err, details: { sqlstate: code } });
  }
  return err;
}

/** Opens a pool on `url` and brings its schema up to date; refuses a database of a newer Berth. */
/**
 * Runs `fn` in one transaction on a pooled client: COMMIT when it returns, ROLLBACK when it throws
 * (a client whose ROLLBACK failed is released as broken, so the pool drops it). Errors come out
 * typed by {@link storeError}.
 */
export async function transaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw storeError(err);
  }
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    throw storeError(err);
  } finally {
    client.release(broken);
  }
}

export async function openPool(url: string, opts: { max?: number } = {}): Promise<pg.Pool> {
  const where = redactUrl(url);
  driver ??= (await loadModule<typeof import('pg')>('pg')).default;
  // pipeline: a statement is sent without waiting for the previous one's answer, so a commit's
  // BEGIN travels with its first statement and its last statement with the COMMIT (one network
  // round trip each instead of two). Results still come back, and are checked, in order.
  const pool = new driver.Pool({ connectionString: url, max: opts.max ?? 8, connectionTimeoutMillis: 10_000, types, pipeline: true } as pg.PoolConfig);
  // An idle client whose server went away (restart, pg_terminate_backend) emits here; without a
  // listener that would crash the process. The pool drops it and the next query reconnects.
  pool.on('error', () => {});
  // A checked-out client whose connection dies emits 'error' besides failing its query; with no
  // listener that event would end the process. The failed query already carries the error.
  pool.on('connect', (client) => client.on('error', () => {}));
  try {
    await migrate(pool, where);
  } catch (err) {
    await pool.end().catch(() => {});
    if (err instanceof BerthError && (err.code === 'store_too_new' || err.code === 'store_not_berth')) throw err;
    throw openError(err, where);
  }
  return pool;
}

function openError(err: unknown, where: string): BerthError {
  const e = err as { code?: string; message?: string };
  const message = (e.message ?? String(err)).replaceAll(/:\/\/[^@/\s]*@/g, '://***@');
  if (e.code === '28P01' || e.code === '28000') {
    return new BerthError('store_auth_failed', `cannot open store ${where}: authentication failed (${message})`, { cause: err, details: { location: where } });
  }
  if (e.code === '3D000') {
    return new BerthError('store_not_found', `cannot open store ${where}: the database does not exist (${message})`, { cause: err, details: { location: where } });
  }
  const inner = (err as { cause?: { code?: string } }).cause?.code ?? e.code ?? '';
  const unreachable = CONNECTION_CODES.has(inner) || inner.startsWith('57P') || /timeout|terminated|ECONNREFUSED/i.test(message);
  return new BerthError(
    unreachable ? 'store_unreachable' : 'store_open_failed',
    `cannot open store ${where}: ${unreachable ? 'the server is unreachable' : 'it failed'} (${message || inner})`,
    { cause: err, retryable: unreachable, details: { location: where } },
  );
}

// One fixed advisory lock key: two hosts starting on a fresh database migrate one after the other.
const MIGRATION_LOCK = 0x6265_7274;

async function migrate(pool: pg.Pool, where: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    // Another program's database must not become a store: Berth's tables would be added beside its own.
    const tables = (await client.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name')).rows.map((r) => r.table_name);
    if (tables.length > 0 && !tables.includes('schema_migrations')) {
      const shown = tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, ... (${tables.length} in all)` : '');
      throw new BerthError('store_not_berth', `${where} is not a Berth store: it is another program's database (tables ${shown}); it was left as it was`, { details: { location: where, tables } });
    }
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)');
    const applied = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    const unknown = [...applied].filter((v) => v > NEWEST_SCHEMA_VERSION);
    if (unknown.length > 0) throw storeTooNew(where, Math.max(...unknown));
    // DDL is transactional here: all pending versions land together or not at all.
    for (const m of SCHEMA_VERSIONS) {
      if (applied.has(m.version)) continue;
      await client.query(m.postgres);
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
