import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * A throwaway PostgreSQL cluster for one test process: `initdb` as the `postgres` user in a temp
 * directory, listening on 127.0.0.1 at a free port with password authentication, stopped and
 * removed by `stop()`. Debian's `postgresql` must be installed (`.ci/setup-postgres`); a missing
 * server is an error, never a skip.
 */
export interface TestPostgres {
  port: number;
  password: string;
  /** `postgres://postgres:…@127.0.0.1:PORT/NAME`. */
  url(database: string): string;
  /** A fresh, empty database; returns its URL. */
  createDatabase(prefix?: string): Promise<string>;
  /**
   * A fresh database already at the current schema (a copy of one migrated template, with its own
   * store identity): what a new store looks like after its first open, without paying for the DDL
   * in every test.
   */
  createStoreDatabase(prefix?: string): Promise<string>;
  /** Runs SQL as the superuser on `database` (default `postgres`). */
  sql<T extends Record<string, unknown> = Record<string, unknown>>(text: string, values?: unknown[], database?: string): Promise<T[]>;
  /** Stops the server at once (as a crash would) and starts it again on the same port and data. */
  restart(opts?: { downMs?: number }): Promise<void>;
  stop(): Promise<void>;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  if (versions.length === 0) throw new Error('PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); run .ci/setup-postgres');
  return join(root, versions.sort((a, b) => Number(b) - Number(a))[0]!, 'bin');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export async function startPostgres(): Promise<TestPostgres> {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  // As root (CI), the server must run as `postgres`: it refuses to start as root.
  const run = (cmd: string, args: string[]) =>
    execFileSync(asRoot ? 'runuser' : join(bin, cmd), asRoot ? ['-u', 'postgres', '--', join(bin, cmd), ...args] : args, { stdio: 'pipe', timeout: 60_000 });
  const dir = mkdtempSync(join(tmpdir(), 'berth-pg-'));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const password = `pw${Math.random().toString(36).slice(2, 10)}`;
  const data = join(dir, 'data');
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, password, { mode: 0o644 });
  run('initdb', ['-D', data, '-U', 'postgres', '--pwfile', pwfile, '--auth-host=scram-sha-256', '--auth-local=trust', '-E', 'UTF8', '--no-instructions', '--no-sync']);
  rmSync(pwfile);
  const port = await freePort();
  const start = () =>
    run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`, 'start']);
  start();
  const url = (database: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`;
  const pools = new Map<string, pg.Pool>();
  const admin = (database: string) => {
    let p = pools.get(database);
    if (!p) {
      p = new pg.Pool({ connectionString: url(database), max: 2 });
      p.on('error', () => {});
      pools.set(database, p);
    }
    return p;
  };
  let n = 0;
  let template: Promise<string> | undefined;
  const migratedTemplate = () =>
    (template ??= (async () => {
      const name = `berth_template_${process.pid}`;
      await admin('postgres').query(`CREATE DATABASE ${name}`);
      const { openPostgresStore } = await import('../../host/store');
      await (await openPostgresStore(url(name))).close();
      return name;
    })());
  return {
    port,
    password,
    url,
    async createDatabase(prefix = 'berth') {
      const name = `${prefix}_${process.pid}_${++n}`;
      await admin('postgres').query(`CREATE DATABASE ${name}`);
      return url(name);
    },
    async createStoreDatabase(prefix = 'berth') {
      const tmpl = await migratedTemplate();
      const name = `${prefix}_${process.pid}_${++n}`;
      await admin('postgres').query(`CREATE DATABASE ${name} TEMPLATE ${tmpl}`);
      // Each store has its own identity (sandboxes are labelled with it); the copy must not share the template's.
      await admin(name).query("UPDATE store_identity SET id = 'store_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16)");
      await admin(name).end();
      pools.delete(name);
      return url(name);
    },
    async sql(text, values = [], database = 'postgres') {
      return (await admin(database).query(text, values)).rows;
    },
    async restart(opts = {}) {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      if (opts.downMs) await new Promise((r) => setTimeout(r, opts.downMs));
      start();
    },
    async stop() {
      for (const p of pools.values()) await p.end().catch(() => {});
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
