import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('berth status says who can move a run that no host drives', { timeout: 180_000 }, () => {
  it('a detached run no host has claimed waits for one (nothing "stopped"), and the same run imported elsewhere is a read-only record, never "berth resume"', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const sub = await fx.cli(['run', fx.plan, '--detach', '--json']);
    expect(sub.code, sub.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(sub).run.id;

    const here = await fx.cli(['status']);
    expect(here.code, here.stderr).toBe(0);
    const line = here.stdout.split('\n').find((l) => l.startsWith(runId))!;
    // Before: "admitted, no live host (stopped 1.2s ago): berth resume RUN", of a run no host ever ran.
    expect(line).toContain('admitted, not claimed by any host yet');
    expect(line).not.toContain('stopped');

    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);
    const other = join(fx.dir, 'other.db');
    const on = async (args: string[]) => runNode(await bundledCli(), [...args, '--store', other]);
    expect((await on(['import', file])).code).toBe(0);
    const there = await on(['status']);
    expect(there.code, there.stderr).toBe(0);
    const imported = there.stdout.split('\n').find((l) => l.startsWith(runId))!;
    // Before: "admitted, no live host (stopped …): berth resume RUN", and berth resume is refused as run_imported.
    expect(imported).toContain('admitted, imported record (read-only)');
    expect(imported).not.toContain('berth resume');
    const json = lastJson<{ runs: Array<{ id: string; owner: unknown; imported: boolean }> }>(await on(['status', '--json']));
    expect(json.runs.find((r) => r.id === runId)).toMatchObject({ owner: null, imported: true });
    // Before: berth logs -f of the imported run printed nothing and never ended (nothing can move it).
    const followed = await runNode(await bundledCli(), ['logs', runId, '-f', '--store', other], {}, 30_000);
    expect(followed.signal).toBeNull();
    expect(followed.code, followed.stderr).toBe(0);
    expect(followed.stdout).toContain(`run ${runId} is admitted (an imported record, read-only: nothing drives it in this store)`);
    // The store it was submitted to still has it to drive: the fixture's cleanup must find no leftovers.
    expect((await fx.cli(['cancel', runId])).code).toBe(0);
  });
});

describe('a run command given an id of another kind', { timeout: 180_000 }, () => {
  it('says what the id names (a session, snapshot or task of this store) and which run to name instead, still run_not_found; berth chat and fork SESSION given a run or a plan\'s session say so, still session_not_found', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const run = lastJson<{ run: { id: string; sessionId: string; rootTaskId: string } }>(end).run;
    const snapshot = (await fx.read((s) => s.listSnapshots({ runId: run.id }))).at(-1)!;
    for (const [command, id, says] of [
      ['show', run.sessionId, `${run.sessionId} is a session; its runs: ${run.id}`],
      ['cancel', run.sessionId, `${run.sessionId} is a session; its runs: ${run.id}`],
      ['export', snapshot.id, `${snapshot.id} is a snapshot (${snapshot.checkpoint}) of run ${run.id}`],
      ['logs', run.rootTaskId, `${run.rootTaskId} is a task (plan) of run ${run.id}`],
    ] as const) {
      const r = await fx.cli([command, id, '--json']);
      expect(r.code).toBe(1);
      const err = (JSON.parse(r.stderr) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe('run_not_found');
      // Before: "no run ID in STORE (see berth status)", as for an id that names nothing.
      expect(err.message, `${command} ${id}`).toContain(says);
    }
    for (const [args, says] of [
      [['chat', run.id, 'hello'], `${run.id} is a plan run`],
      [['chat', run.sessionId, 'hello'], `${run.sessionId} is the session of plan run ${run.id}, not of an agent`],
      [['fork', run.sessionId, '--at', '1'], `${run.sessionId} is the session of plan run ${run.id}, not of an agent`],
    ] as const) {
      const r = await fx.cli([...args, '--json']);
      expect(r.code).toBe(1);
      const err = (JSON.parse(r.stderr) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe('session_not_found');
      // Before: "no agent session ID (see berth status)".
      expect(err.message, args.join(' ')).toContain(says);
    }
    const unknown = await fx.cli(['show', 'run_nope', '--json']);
    expect((JSON.parse(unknown.stderr) as { error: { message: string } }).error.message).toContain('(see berth status)');
  });
});
