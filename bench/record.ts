/**
 * record: `berth export` of a run with 10,000 entries vs a raw SELECT of the same rows serialised
 * to JSON (same store, same run), and `berth check` over 1,000 stored runs (runs per second).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkStore, exportRun } from '../host/record';
import { openSqliteStore } from '../host/store';
import type { Report } from './run';

const ENTRIES = 10_000;
const RUNS = 1_000;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export async function seedRun(store: ReturnType<typeof openSqliteStore>, i: number, entries: number): Promise<string> {
  const sessionId = `ses_${i}`;
  const runId = `run_${i}`;
  const versions = { kernel: 'berth@0.1.0', envFingerprint: 'sha256:env', imageDigest: 'sha256:img' };
  await store.commit({ sessionId, label: 'submit', createSession: { meta: { name: 'bench' } }, runs: [{ id: runId, kind: 'bench', submissionId: null, rootTaskId: `task_${i}`, versions }], tasks: [{ id: `task_${i}`, runId, parentId: null, kind: 'k', kindVersion: 1, phase: 'start', input: { i } }] });
  await store.commit({ sessionId, label: 'start', runTransitions: [{ runId, from: 'admitted', to: 'running', actor: 'host:b', reason: 'go' }] });
  // One never effect with two attempts (the first refused unsent), so check reads attempt logs.
  const effect = { id: `eff_${i}`, create: { runId, taskId: `task_${i}`, kind: 'bench.send', intent: { i }, replay: 'never' as const } };
  await store.commit({ sessionId, label: 'effect.begin', effects: [{ ...effect, set: { status: 'executing', attempts: 1 } }] });
  await store.commit({ sessionId, label: 'effect.fail', effects: [{ id: effect.id, expectStatus: 'executing', set: { status: 'intended', error: { code: 'refused', delivery: 'not_sent' } } }] });
  await store.commit({ sessionId, label: 'effect.begin', effects: [{ id: effect.id, expectStatus: 'intended', set: { status: 'executing', attempts: 2 } }] });
  await store.commit({ sessionId, label: 'effect.done', effects: [{ id: effect.id, expectStatus: 'executing', set: { status: 'confirmed', receipt: { id: i } } }] });
  for (let done = 0; done < entries; done += 500) {
    const batch = Array.from({ length: Math.min(500, entries - done) }, (_, k) => ({ id: `ent_${i}_${done + k}`, kind: 'plan.step.output', runId, body: { line: done + k, text: `output line ${done + k} of a step that prints a fair amount` } }));
    await store.commit({ sessionId, label: 'out', entries: batch });
  }
  await store.commit({ sessionId, label: 'end', runTransitions: [{ runId, from: 'running', to: 'completed', actor: 'host:b', reason: 'done' }] });
  return runId;
}

export default async function record(report: Report): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-record-'));
  try {
    const store = openSqliteStore(join(dir, 'record.db'));
    const big = await seedRun(store, 0, ENTRIES);
    const db = store.db;
    const raw = () => {
      const run = db.prepare('SELECT * FROM runs WHERE id = ?').get(big) as { session_id: string };
      const rows = {
        run,
        transitions: db.prepare('SELECT * FROM run_transitions WHERE run_id = ? ORDER BY n').all(big),
        tasks: db.prepare('SELECT * FROM tasks WHERE run_id = ?').all(big),
        effects: db.prepare('SELECT * FROM effects WHERE run_id = ?').all(big),
        entries: db.prepare('SELECT * FROM entries WHERE session_id = ? AND run_id = ? ORDER BY seq').all(run.session_id, big),
        commits: db.prepare('SELECT * FROM commits WHERE session_id = ? ORDER BY seq').all(run.session_id),
      };
      return JSON.stringify(rows).length;
    };
    const exp = async () => (await exportRun(store, big, Date.now())).text.length;
    const rawMs: number[] = [];
    const expMs: number[] = [];
    // Medians of 21 rounds: at 7, a collection landing on either side moved the ratio 1.32x-1.63x between runs a minute apart on a quiet machine.
    const rounds = Number(process.env.BENCH_RECORD_ROUNDS ?? 21);
    for (let k = 0; k < rounds; k++) {
      let t0 = performance.now();
      raw();
      rawMs.push(performance.now() - t0);
      t0 = performance.now();
      await exp();
      expMs.push(performance.now() - t0);
    }
    report('export_vs_raw', median(expMs) / median(rawMs), 'ratio');
    report('export_10k_entries_ms', median(expMs), 'absolute');

    // Linear in runs: the rate over half the runs and over all of them should match.
    // Wall time, and this process's CPU time: on a machine shared at load L a single thread gets
    // about cores/L of a core, so the wall rate there says more about the load than about the checker.
    let cpuRate = 0;
    const rate = async (ids: string[] | 'all') => {
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const { checked, violations } = await checkStore(store, ids, Date.now());
      const c = process.cpuUsage(c0);
      if (violations.length) throw new Error(`bench runs broke invariants: ${violations[0]!.invariant}`);
      cpuRate = checked / ((c.user + c.system) / 1e6);
      return checked / ((performance.now() - t0) / 1000);
    };
    for (let i = 1; i <= RUNS; i++) await seedRun(store, i, 5);
    const half = await rate(Array.from({ length: RUNS / 2 }, (_, i) => `run_${i + 1}`));
    const all = await rate(Array.from({ length: RUNS }, (_, i) => `run_${i + 1}`));
    report('check_runs_per_s', all, 'absolute');
    report('check_runs_per_cpu_s', cpuRate, 'absolute');
    report('check_500_runs_per_s', half, 'absolute');
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
