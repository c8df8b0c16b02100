/**
 * The PostgreSQL figure of the `fleet` suite. `fleet.pg_steps_vs_raw`: durable phase transitions
 * through the whole kernel on the PostgreSQL store vs raw `pg` transactions writing the same rows
 * (commit record, task CAS update, session sequence) with the same durability (synchronous_commit
 * on), same server, same run. The server is `BERTH_BENCH_PG` (a database URL) when set, else a
 * throwaway cluster started here as for the tests.
 */
import pg from 'pg';
import { openPostgresStore } from '../host/store';
import { startPostgres, type TestPostgres } from '../test/support/postgres';
import type { Report } from './run';
import { kernelSteps } from './_kernel-steps';
import { postmasterPid } from './_fleet-cpu';
import { workersVsOne } from './_fleet-scaling';

const PG_STEPS = 1000;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function kernelStepsOnPostgres(url: string): Promise<{ perSecond: number; commitMs: number[] }> {
  return kernelSteps(await openPostgresStore(url), PG_STEPS);
}

/** The same rows per step written by hand on one connection, each statement prepared once. */
async function rawPgSteps(url: string): Promise<number> {
  await (await openPostgresStore(url)).close(); // the schema
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("INSERT INTO sessions (id, created_at) VALUES ('s', 0)");
    await client.query(
      "INSERT INTO tasks (id, session_id, kind, kind_version, status, phase, checkpoint_json, input_json, created_at, updated_at) VALUES ('t', 's', 'stepper', 1, 'running', 'step', 'null', '{}', 0, 0)",
    );
    const t0 = performance.now();
    for (let i = 1; i <= PG_STEPS; i++) {
      await client.query('BEGIN');
      await client.query({ name: 'c', text: 'INSERT INTO commits (session_id, seq, at, label, actor) VALUES ($1, $2, $3, $4, $5)', values: ['s', i, Date.now(), 'phase.next:stepper', 'host:bench'] });
      const r = await client.query({
        name: 't',
        text: 'UPDATE tasks SET phase = $1, checkpoint_json = $2, attempts = 0, version = version + 1, updated_at = $3 WHERE id = $4 AND version = $5',
        values: ['step', JSON.stringify({ i }), Date.now(), 't', i],
      });
      if (r.rowCount !== 1) throw new Error('lost row');
      await client.query({ name: 's', text: 'UPDATE sessions SET last_seq = $1 WHERE id = $2', values: [i, 's'] });
      await client.query('COMMIT');
    }
    return PG_STEPS / ((performance.now() - t0) / 1000);
  } finally {
    await client.end();
  }
}

/** `fleet.pg_steps_vs_raw` and its absolutes (goal >= 0.7x). */
export async function pgStepsVsRaw(report: Report, newDatabase: () => Promise<string>): Promise<void> {
  // Alternate to spread server noise over both sides; keep the best of each.
  const raw: number[] = [];
  const durable: Array<Awaited<ReturnType<typeof kernelStepsOnPostgres>>> = [];
  for (let round = 0; round < 2; round++) {
    raw.push(await rawPgSteps(await newDatabase()));
    durable.push(await kernelStepsOnPostgres(await newDatabase()));
  }
  const bestRaw = Math.max(...raw);
  const best = durable.reduce((a, b) => (a.perSecond > b.perSecond ? a : b));
  const sorted = [...best.commitMs].sort((a, b) => a - b);
  report('pg_steps_vs_raw', best.perSecond / bestRaw, 'ratio');
  report('pg_steps_per_second', best.perSecond, 'absolute');
  report('raw_pg_tx_per_second', bestRaw, 'absolute');
  report('pg_commit_p50_ms', percentile(sorted, 50), 'absolute');
  report('pg_commit_p99_ms', percentile(sorted, 99), 'absolute');
}

/** A fresh database per measurement: on `BERTH_BENCH_PG`'s server, or on a throwaway cluster. */
async function databases(): Promise<{ next(): Promise<string>; close(): Promise<void>; postmaster?: number }> {
  const given = process.env.BERTH_BENCH_PG;
  if (!given) {
    const cluster: TestPostgres = await startPostgres();
    return { next: () => cluster.createDatabase('bench'), close: () => cluster.stop(), postmaster: postmasterPid(cluster.port) };
  }
  const admin = new pg.Client({ connectionString: given });
  await admin.connect();
  let n = 0;
  return {
    async next() {
      const name = `berth_bench_${process.pid}_${++n}`;
      await admin.query(`CREATE DATABASE ${name}`);
      const u = new URL(given);
      u.pathname = `/${name}`;
      return u.toString();
    },
    close: () => admin.end(),
  };
}

/**
 * `fleet.pg_steps_vs_raw`, and `fleet.pg_two_workers_vs_one` / `pg_three_workers_vs_one` (worker
 * processes bundled at `script`, each worker's and the server's CPU printed beside them), on
 * databases {@link databases} gives.
 */
export async function pgFigures(report: Report, script: string): Promise<void> {
  const dbs = await databases();
  try {
    await pgStepsVsRaw(report, () => dbs.next());
    await workersVsOne(report, script, 'pg_', () => dbs.next(), dbs.postmaster);
  } finally {
    await dbs.close();
  }
}
