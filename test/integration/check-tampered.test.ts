import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

interface Checked {
  checked: number;
  ok: boolean;
  violations: { invariant: string; runId: string }[];
  unreadable: { runId: string; code: string; message: string; details: { table: string; rowId: string; field: string } }[];
}

/**
 * Two runs of `steps`, and a copy of the store for the operator to edit (the fixture's own check of
 * its store must still see the runs as they ran); `edit` runs on the copy before it is closed.
 */
async function twoRunsEdited(steps: Parameters<typeof planFixture>[0], edit: (db: Database.Database, runs: [string, string]) => void) {
  fx = await planFixture(steps);
  const runs: string[] = [];
  for (let i = 0; i < 2; i++) {
    const r = await fx.cli(['run', fx.plan, '--json']);
    expect(r.code, r.stderr.slice(-500)).toBe(0);
    runs.push(lastJson<{ run: { id: string } }>(r).run.id);
  }
  const edited = join(fx.dir, 'edited.db');
  const db = new Database(fx.store);
  try {
    db.prepare('VACUUM INTO ?').run(edited);
  } finally {
    db.close();
  }
  const e = new Database(edited);
  try {
    edit(e, runs as [string, string]);
  } finally {
    e.close();
  }
  return { runs: runs as [string, string], check: async (args: string[]) => runNode(await bundledCli(), [...args, '--store', edited]) };
}

describe('berth check on a store an operator edited by hand', { timeout: 180_000 }, () => {
  it('names the run whose row no longer reads as a finding and still checks every other run, instead of stopping at the first bad row', async () => {
    const { runs: [garbled, lying], check } = await twoRunsEdited([{ name: 'one', run: 'echo one' }], (e, [g, l]) => {
      e.prepare(`UPDATE effects SET status = 'bogus' WHERE run_id = ?`).run(g);
      e.prepare(`UPDATE effects SET status = 'unknown' WHERE run_id = ?`).run(l);
    });
    const all = await check(['check', '--all', '--json']);
    // Before: exit 1 with only `store_row_invalid` on stderr (no run named, the other run never checked) and nothing on stdout.
    expect(all.code, all.stderr).toBe(1);
    const out = lastJson<Checked>(all);
    expect(out).toMatchObject({ checked: 2, ok: false });
    expect(out.unreadable).toEqual([expect.objectContaining({ runId: garbled, code: 'store_row_invalid', details: expect.objectContaining({ table: 'effects', field: 'status' }) })]);
    // The uncertain effect breaks two rules: a completed run with it unresolved, a step that ended ok on it.
    expect(out.violations).toEqual(expect.arrayContaining([expect.objectContaining({ invariant: 'completed_with_unresolved', runId: lying })]));
    expect(out.violations.every((v) => v.runId === lying)).toBe(true);

    const human = await check(['check', garbled]);
    expect(human.code).toBe(1);
    expect(human.stdout).toContain(`${garbled}: its stored rows cannot be read`);
    expect(human.stdout).toContain('status holds "bogus"');
    expect(human.stderr).toContain(`berth: run(s) with unreadable rows: ${garbled}`);
  });

  it('reports a run whose root task row was deleted, and one whose step task row was deleted while its effect names it', async () => {
    let stepTask = '';
    const { runs: [rootless, stepless], check } = await twoRunsEdited([{ name: 'one', run: 'echo one' }, { name: 'two', run: 'echo two' }], (e, [r, st]) => {
      e.prepare('DELETE FROM tasks WHERE id = (SELECT root_task_id FROM runs WHERE id = ?)').run(r);
      stepTask = (e.prepare(`SELECT id FROM tasks WHERE run_id = ? AND parent_id IS NOT NULL ORDER BY created_at LIMIT 1`).get(st) as { id: string }).id;
      e.prepare('DELETE FROM tasks WHERE id = ?').run(stepTask);
    });
    const one = await check(['check', rootless]);
    // Before: exit 0, "1 run(s) checked: every invariant holds (16 invariants)".
    expect(one.code, one.stdout).toBe(1);
    expect(one.stdout).toContain('record_complete');
    expect(one.stdout).toMatch(/root task task_\w+, which the record does not hold/);
    const all = lastJson<Checked>(await check(['check', '--all', '--json']));
    expect([...new Set(all.violations.filter((v) => v.invariant === 'record_complete').map((v) => v.runId))].sort()).toEqual([rootless, stepless].sort());
    expect(JSON.stringify(all.violations)).toContain(stepTask);
  });
});
