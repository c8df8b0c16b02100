/**
 * kernel: durable phase transitions per second through the whole kernel (scheduler, decision,
 * compare-and-set commit) vs raw better-sqlite3 transactions writing the same rows with the same
 * durability (WAL, synchronous FULL), measured in the same run on the same disk.
 * concurrent_20_runs_vs_single_tx: 20 runs driven at once by one kernel (100 transitions each),
 * total steps per second, vs one raw transaction per step.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '../host/store';
import type { Report } from './run';
import { concurrentKernelSteps, kernelSteps as kernelStepsOn } from './_kernel-steps';

const STEPS = 2000;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function kernelSteps(dir: string): Promise<{ perSecond: number; commitMs: number[] }> {
  return kernelStepsOn(openSqliteStore(join(dir, 'kernel.db')), STEPS);
}

/**
 * The same rows per step, written by hand: a commit record, the task's CAS update, the session's
 * sequence. Seeds its session and task in `db` and returns one step's transaction (also used by
 * bench/_kernel-ab.ts against another checkout's store).
 */
export function rawStepper(db: ReturnType<typeof openSqliteStore>['db']): (i: number) => void {
  db.prepare("INSERT INTO sessions (id, created_at) VALUES ('s', 0)").run();
  db.prepare(
    "INSERT INTO tasks (id, session_id, kind, kind_version, status, phase, checkpoint_json, input_json, created_at, updated_at) VALUES ('t', 's', 'stepper', 1, 'running', 'step', 'null', '{}', 0, 0)",
  ).run();
  const commit = db.prepare('INSERT INTO commits (session_id, seq, at, label, actor) VALUES (?, ?, ?, ?, ?)');
  const task = db.prepare('UPDATE tasks SET phase = ?, checkpoint_json = ?, attempts = 0, version = version + 1, updated_at = ? WHERE id = ? AND version = ?');
  const session = db.prepare('UPDATE sessions SET last_seq = ? WHERE id = ?');
  const step = db.transaction((i: number) => {
    commit.run('s', i, Date.now(), 'phase.next:stepper', 'host:bench');
    if (task.run('step', JSON.stringify({ i }), Date.now(), 't', i).changes !== 1) throw new Error('lost row');
    session.run(i, 's');
  });
  return (i) => step.immediate(i);
}

async function rawSteps(dir: string): Promise<number> {
  const store = openSqliteStore(join(dir, 'raw.db'));
  const step = rawStepper(store.db);
  const t0 = performance.now();
  for (let i = 1; i <= STEPS; i++) step(i);
  const seconds = (performance.now() - t0) / 1000;
  await store.close();
  return STEPS / seconds;
}

export default async function kernelBench(report: Report): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-'));
  try {
    // Alternate to spread disk noise over both sides; keep the best of each.
    const raw: number[] = [];
    const durable: Array<Awaited<ReturnType<typeof kernelSteps>>> = [];
    for (let round = 0; round < 2; round++) {
      raw.push(await rawSteps(mkdtempSync(join(dir, 'r'))));
      durable.push(await kernelSteps(mkdtempSync(join(dir, 'k'))));
    }
    const bestRaw = Math.max(...raw);
    const best = durable.reduce((a, b) => (a.perSecond > b.perSecond ? a : b));
    const sorted = [...best.commitMs].sort((a, b) => a - b);
    report('steps_vs_sqlite', best.perSecond / bestRaw, 'ratio');
    report('steps_per_second', best.perSecond, 'absolute');
    report('raw_sqlite_tx_per_second', bestRaw, 'absolute');
    report('commit_p50_ms', percentile(sorted, 50), 'absolute');
    report('commit_p99_ms', percentile(sorted, 99), 'absolute');
    // 20 runs at once on one kernel vs one raw transaction per step (the same durability).
    const concurrent: number[] = [];
    const raw20: number[] = [];
    for (let round = 0; round < 2; round++) {
      raw20.push(await rawSteps(mkdtempSync(join(dir, 'r20'))));
      concurrent.push(await concurrentKernelSteps(openSqliteStore(join(mkdtempSync(join(dir, 'c20')), 'kernel.db')), 20, STEPS / 20));
    }
    report('concurrent_20_runs_vs_single_tx', Math.max(...concurrent) / Math.max(...raw20), 'ratio');
    report('concurrent_20_runs_steps_per_second', Math.max(...concurrent), 'absolute');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
