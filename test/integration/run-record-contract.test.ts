import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RunRecordSchema, sealRecord, type RunRecord } from '../../host/record';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const readRecord = (file: string): RunRecord => RunRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));

async function cliOn(store: string, args: string[]) {
  return runNode(await bundledCli(), [...args, '--store', store], { BERTH_HOST_ID: `other-${process.pid}`, BERTH_OPERATOR: 'tester' });
}

describe('the run record carries the seed contract fields', { timeout: 300_000 }, () => {
  it('exports retry budget, timeouts, attempts, deletions, dependency-failure action and versions per transition of a real plan run, and says recorded:false with a reason for what Berth cannot know', async () => {
    fx = await planFixture([{ name: 'lint', run: 'exit 2' }, { name: 'build', run: 'echo built > out.txt' }]);
    // The fixture writes name, run and replay only: this plan also lets lint fail and bounds it.
    writeFileSync(fx.plan, readFileSync(fx.plan, 'utf8').replace('replay: safe\n', 'replay: safe\n    allowFailure: true\n    timeoutS: 30\n'));
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);
    const r = readRecord(file);
    const c = r.contract!;

    // every task kind of the run has its retry entry, with the budget of the handler the CLI's host registers for it
    expect(c.retry.map((k) => k.kind).sort()).toEqual([...new Set(r.tasks.map((t) => t.kind))].sort());
    expect(c.retry.find((k) => k.kind === 'plan')).toMatchObject({ version: 1, maxRetries: 3, restartLimit: 10 });
    expect(c.retry.find((k) => k.kind === 'plan-step')).toMatchObject({ version: 1, maxRetries: 8, restartLimit: 10 });
    for (const k of c.retry) expect(k.backoff).toMatch(/2\^attempt/);
    expect(c.modelRetry).toMatchObject({ recorded: false });
    expect(c.timeouts).toEqual({ commandTimeoutS: 120, runBudgetS: 86400, steps: [{ step: 'lint', timeoutS: 30 }, { step: 'build', timeoutS: null }], acceptanceTimeoutS: null, modelTimeoutMs: null });
    expect(c.cancellationGrace).toMatchObject({ recorded: false });
    expect(c.effectAttempts.map((e) => e.effectId)).toEqual(r.effects.map((e) => e.id));
    // Each attempt of each effect by its id, as the effect's attempt log holds it.
    expect(c.effectAttempts.every((e) => e.attempts >= 1 && Array.isArray(e.attemptIds) && e.attemptIds.length === e.attempts)).toBe(true);
    expect(c.retention.rule).toMatchObject({ recorded: false });
    // the run ended, so its sandbox was released: a deletion of the record
    const leases = r.isolation.leases.filter((l) => l.releasedAt !== null);
    expect(leases.length).toBeGreaterThan(0);
    expect(c.retention.deletions.filter((d) => d.what === 'lease').map((d) => d.id).sort()).toEqual(leases.map((l) => l.id).sort());
    expect(c.dependencyFailure).toEqual([{ step: 'lint', action: 'continue' }, { step: 'build', action: 'fail_run' }]);
    expect(c.transitionVersions.map((t) => t.n)).toEqual(r.transitions.map((t) => t.n));
    expect(c.transitionVersions.at(-1)!.versions).toEqual(r.transitions.at(-1)!.versions);
    expect(c.transitionVersions.at(-1)!.taskKinds.map((k) => k.kind).sort()).toEqual([...new Set(r.tasks.map((t) => t.kind))].sort());
    expect(c.transitionVersions[0]!.taskKinds.map((k) => k.kind)).toEqual([r.tasks.find((t) => t.id === r.run.rootTaskId)!.kind]);

    // check passes on it; it imports elsewhere, and a record of the earlier format (no contract member) still imports
    const check = await fx.cli(['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
    const imp = await cliOn(join(fx.dir, 'new.db'), ['import', file, '--json']);
    expect(imp.code, imp.stderr).toBe(0);
    expect(lastJson<{ runId: string }>(imp).runId).toBe(runId);

    const { contract: _c, digest: _d, ...old } = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const oldFile = join(fx.dir, 'old.json');
    writeFileSync(oldFile, sealRecord(old).text);
    const impOld = await cliOn(join(fx.dir, 'old.db'), ['import', oldFile, '--json']);
    expect(impOld.code, impOld.stderr).toBe(0);
    const checkOld = await cliOn(join(fx.dir, 'old.db'), ['check', runId, '--json']);
    expect(checkOld.code, checkOld.stdout + checkOld.stderr).toBe(0);
  });
});
