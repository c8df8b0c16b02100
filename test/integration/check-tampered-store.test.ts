import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';
import { bundledCli, planFixture } from '../support/plan-fixture';

/**
 * `berth check` against a real stored run broken one row at a time, as a crashed or buggy host (or
 * someone with the file) could leave it. Each of these passed the checker before: it read every
 * rule it had from rows that were still there, and none asked whether the rows it needed were.
 */
let fx: Awaited<ReturnType<typeof planFixture>>;
let runId = '';
let n = 0;

beforeAll(async () => {
  fx = await planFixture([
    { name: 'one', run: 'echo one > one.txt' },
    { name: 'two', run: 'echo two > two.txt', replay: 'never' },
  ]);
  const end = await fx.cli(['run', fx.plan, '--json']);
  expect(end.code, end.stderr.slice(-1000)).toBe(0);
  runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
}, 300_000);
afterAll(async () => fx?.cleanup(), 300_000);

/** A copy of the store with `sql` applied (`$R` is the run id), and what `berth check RUN --json` says of it. */
async function checkAfter(sql: string) {
  const file = join(fx.dir, `tampered-${++n}.db`);
  copyFileSync(join(fx.dir, 'berth.db'), file);
  const db = new Database(file);
  db.exec(sql.replaceAll('$R', runId));
  db.close();
  const r = await runNode(await bundledCli(), ['check', runId, '--json', '--store', file], { BERTH_HOST_ID: `check-${process.pid}`, BERTH_OPERATOR: 'tester' });
  const out = JSON.parse(r.stdout) as { ok: boolean; violations: Array<{ invariant: string; message: string }> };
  return { code: r.code, ok: out.ok, invariants: [...new Set(out.violations.map((v) => v.invariant))], messages: out.violations.map((v) => v.message) };
}

const STEP_TASK = "(SELECT id FROM tasks WHERE run_id = '$R' AND kind = 'plan-step' AND input_json LIKE '%\"index\":1%')";

describe('berth check on a stored run with one row broken', { timeout: 300_000 }, () => {
  it('passes the run as it was stored', async () => {
    expect(await checkAfter('SELECT 1')).toMatchObject({ code: 0, ok: true, invariants: [] });
  });

  const cases: Array<[string, string, string]> = [
    ['a step task still running in a completed run', `UPDATE tasks SET status = 'running' WHERE id = ${STEP_TASK}`, 'final_run_settled'],
    ["a completed run whose root task ended in error", "UPDATE tasks SET outcome = 'error' WHERE run_id = '$R' AND kind = 'plan'", 'final_run_settled'],
    ['a step task row deleted', `DELETE FROM tasks WHERE id = ${STEP_TASK}`, 'record_complete'],
    ['the root task row deleted', "DELETE FROM tasks WHERE run_id = '$R' AND kind = 'plan'", 'record_complete'],
    ["the effect of a step that ended ok deleted", "DELETE FROM effects WHERE id = '$R:step:1:g0'", 'record_complete'],
    ['the lease the snapshots were taken in deleted', "DELETE FROM leases WHERE run_id = '$R'", 'record_complete'],
    ['transitions without the versions in force', "UPDATE run_transitions SET versions_json = '{}' WHERE run_id = '$R' AND n = 3", 'record_complete'],
    ['a commit row between two kept ones deleted', "DELETE FROM commits WHERE seq = 3 AND session_id = (SELECT session_id FROM runs WHERE id = '$R')", 'monotonic_sequences'],
    ['a confirmed effect with no attempt, counted or logged', "UPDATE effects SET attempts = 0, attempts_json = '[]' WHERE id = '$R:step:1:g0'", 'settled_provenance'],
  ];
  for (const [what, sql, invariant] of cases) {
    it(`reports ${invariant} for ${what}`, async () => {
      const found = await checkAfter(sql);
      expect(found.code, found.messages.join('\n')).toBe(1);
      expect(found.invariants, found.messages.join('\n')).toContain(invariant);
    });
  }
});
