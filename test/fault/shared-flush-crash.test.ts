import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { rawSql } from '../support/store-kinds';

const RUNS = 8;
const STEPS = 12;
let script: string;
const dirs: string[] = [];

beforeAll(async () => {
  script = await bundleScript(join(import.meta.dirname, 'shared-flush-job.ts'));
}, 120_000);

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
});

/** Every session's commits are one gap-free sequence that its session row and the store-wide log agree with, and each step's commit carries its task write. */
async function consistent(db: string) {
  const store = openSqliteStore(db);
  try {
    const sessions = await rawSql(store, 'SELECT id, last_seq FROM sessions');
    for (const s of sessions) {
      const seqs = (await rawSql(store, `SELECT seq FROM commits WHERE session_id = '${String(s.id)}' ORDER BY seq`)).map((r) => Number(r.seq));
      expect(seqs).toEqual(Array.from({ length: Number(s.last_seq) }, (_, i) => i + 1));
      const logged = await rawSql(store, `SELECT COUNT(*) AS n FROM commit_log WHERE session_id = '${String(s.id)}'`);
      expect(Number(logged[0]!.n)).toBe(seqs.length);
    }
    const steps: Record<string, number> = {};
    for (const r of await rawSql(store, "SELECT t.session_id AS sid, t.checkpoint_json AS cp, t.status AS status, (SELECT COUNT(*) FROM commits c WHERE c.session_id = t.session_id AND c.label = 'phase.next:stepper') AS n FROM tasks t")) {
      const i = (JSON.parse(String(r.cp)) as { i: number } | null)?.i ?? 0;
      // The task's checkpoint counts exactly the step commits of its session: no commit without its task write, no task write without its commit.
      expect(i).toBe(Number(r.n));
      steps[String(r.sid)] = i;
    }
    const commits = Number((await rawSql(store, 'SELECT COUNT(*) AS n FROM commits'))[0]!.n);
    return { commits, steps };
  } finally {
    await store.close();
  }
}

it('a host killed after its commits were applied and before their shared flush keeps each applied commit whole (a process crash keeps the WAL), and the runs resume to the same end', async () => {
  // In a round of steps: several runs' commits applied, none of that round flushed or answered
  // yet. How many share the flush the kill prevents depends on how the runs' commits interleave,
  // which a loaded machine can change (CI once saw one): a kill that found a single commit pending
  // is tried again one round later, in a fresh store; every try is printed.
  let db = '';
  let hits: string[] = [];
  for (let round = 3; round <= 6; round++) {
    const dir = mkdtempSync(join(tmpdir(), 'berth-group-crash-'));
    dirs.push(dir);
    db = join(dir, 'job.db');
    const log = join(dir, 'faults.log');
    const target = `unflushed:phase.next:stepper#${(round - 1) * RUNS + 3}`;
    const killed = await runNode(script, [db, String(RUNS), String(STEPS)], { BERTH_FAULT: target, BERTH_FAULT_LOG: log }, 120_000);
    expect(killed.signal).toBe('SIGKILL');
    hits = readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[1]!);
    expect(hits.at(-1)).toBe('unflushed:phase.next:stepper');
    const pending = hits.slice(hits.map((h, i) => (h.startsWith('after:') ? i : -1)).reduce((x, y) => Math.max(x, y), -1) + 1).filter((h) => h.startsWith('unflushed:')).length;
    console.log(`shared-flush crash: killed at ${target} with ${pending} applied commit(s) unflushed`);
    if (pending >= 2) break;
  }
  // Commits applied since the last answer (an `after:` hit): they share the flush the kill prevented.
  const lastAfter = hits.map((h, i) => (h.startsWith('after:') ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
  expect(hits.slice(lastAfter + 1).filter((h) => h.startsWith('unflushed:')).length).toBeGreaterThanOrEqual(2);
  const after = await consistent(db);
  // Every applied commit is in the store, the unanswered ones included, each with all of its writes.
  expect(after.commits).toBe(hits.filter((h) => h.startsWith('unflushed:')).length);
  expect(after.commits).toBeGreaterThan(hits.filter((h) => h.startsWith('after:')).length);

  const resumed = await runNode(script, [db, String(RUNS), String(STEPS)], {}, 120_000);
  expect(resumed.code, resumed.stderr).toBe(0);
  expect((JSON.parse(resumed.stdout.trim().split('\n').pop()!) as { states: string[] }).states).toEqual(Array(RUNS).fill('completed'));
  const end = await consistent(db);
  expect(Object.values(end.steps)).toEqual(Array(RUNS).fill(STEPS - 1));
}, 300_000);
