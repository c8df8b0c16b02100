/**
 * Where the PostgreSQL worker-scaling time goes: `npx tsx bench/_fleet-pg-probe.ts [WORKER_SCRIPT]`.
 * Runs the fleet bench's 200 short runs with 1 then 2 workers on a throwaway cluster, samples
 * pg_stat_activity (state and wait event of every bench backend) every few ms, and prints each
 * worker's store calls per run (BERTH_BENCH_COUNT in _fleet-worker.ts).
 */
import { readdirSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startPostgres } from '../test/support/postgres';
import { bundleScript } from '../test/support/bundle-script';
import { postmasterPid } from './_fleet-cpu';
import { throughput } from './_fleet-scaling';

const cluster = await startPostgres();
const script = process.argv[2] ?? (await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts')));
const postmaster = postmasterPid(cluster.port);
const countDir = mkdtempSync(join(tmpdir(), 'fleet-probe-'));
try {
  for (const n of (process.env.PROBE_N ?? '1,2,1,2').split(',').map(Number)) {
    const url = await cluster.createDatabase('probe');
    const db = new URL(url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: cluster.url('postgres') });
    await admin.connect();
    const waits = new Map<string, number>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await admin.query<{ s: string }>(
          `SELECT coalesce(state,'?') || ' ' || coalesce(wait_event_type,'-') || ':' || coalesce(wait_event,'-') AS s FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
          [db],
        );
        const w = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE NOT granted`);
        waits.set('#locks not granted', (waits.get('#locks not granted') ?? 0) + Number(w.rows[0]!.n));
        for (const { s } of r.rows) waits.set(s, (waits.get(s) ?? 0) + 1);
        waits.set('#samples', (waits.get('#samples') ?? 0) + 1);
        await new Promise((res) => setTimeout(res, 3));
      }
    })();
    const stats = async () => {
      const [w] = (await admin.query<Record<string, string>>('SELECT wal_records, wal_bytes, wal_write, wal_sync FROM pg_stat_wal')).rows;
      const [d] = (await admin.query<Record<string, string>>('SELECT xact_commit, xact_rollback, deadlocks FROM pg_stat_database WHERE datname = $1', [db])).rows;
      return Object.fromEntries(Object.entries({ ...w, ...d }).map(([k, v]) => [k, Number(v)]));
    };
    const stats0 = await stats();
    const prefix = join(countDir, `n${n}-${Date.now()}`);
    process.env.BERTH_BENCH_COUNT = prefix;
    const s = await throughput(script, url, n, postmaster);
    sampling = false;
    await sampler;
    const stats1 = await stats();
    console.log('  per run: ' + Object.keys(stats1).map((k) => `${k} ${((stats1[k]! - stats0[k]!) / 200).toFixed(2)}`).join(', '));
    await admin.end();
    console.log(`\n== ${n} worker(s): ${s.runsPerSecond.toFixed(1)} runs/s, workers ${s.workerCores.map((c) => c.toFixed(2)).join(' + ')} cores, server ${s.serverCores?.toFixed(2)}`);
    const samples = waits.get('#samples')!;
    console.log([...waits].filter(([k]) => k !== '#samples').sort((a, b) => b[1] - a[1]).map(([k, v]) => `  ${k}: ${(v / samples).toFixed(2)} backends avg`).join('\n'));
    for (const f of readdirSync(countDir).filter((f) => f.startsWith(prefix.split('/').at(-1)!))) {
      const c = JSON.parse(readFileSync(join(countDir, f), 'utf8')) as Record<string, { n: number; ms: number }>;
      console.log(`  worker ${f}: ` + Object.entries(c).sort((a, b) => b[1].n - a[1].n).map(([k, v]) => `${k} ${(v.n / 200).toFixed(2)}/run ${(v.ms / v.n).toFixed(1)}ms`).join(', '));
    }
  }
} finally {
  await cluster.stop();
}
