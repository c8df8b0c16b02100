import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { containerStdout } from '../support/agent-observe';
import { startCountingService } from '../support/counting-service';
import { deployPlan } from '../support/deploy-plan';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { lastJson, planFixture } from '../support/plan-fixture';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string; alreadyDone?: string }> };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let service: Awaited<ReturnType<typeof startCountingService>> | undefined;
afterEach(async () => {
  await service?.close();
  await fx?.cleanup();
  fx = undefined;
  service = undefined;
});

const state = async (f: NonNullable<typeof fx>, runId: string) => (await f.read((s) => s.getRun(runId)))!.state;

async function removeLiveSandboxes(f: NonNullable<typeof fx>): Promise<void> {
  for (const l of await f.read((s) => s.listLeases({}))) {
    if (l.releasedAt === null) await f.docker.getContainer(l.containerId).remove({ force: true }).catch(() => {});
  }
}

describe('reconciliation has no dead end', { timeout: 300_000 }, () => {
  it('after a kill during a never step\'s snapshot and a removed sandbox: says the sandbox is unusable, refuses --accept alone without failing, and finishes with --accept --restore', async () => {
    ({ fx, service } = await deployPlan('cat steps.log'));
    // Snapshots: upload, one, deploy; killed with deploy's image made but not recorded.
    fx.allowLeftovers('the kill after snapshot.take#3 leaves the deploy snapshot image whose record never commits; by design (issue 12.2) `berth gc` removes such an image after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:snapshot.take#3' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    expect(service.counts()).toEqual({ deploy: 1 });
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    await removeLiveSandboxes(fx);

    const parked = await fx.cli(['resume', runId, '--json']);
    expect(parked.code, parked.stderr).toBe(3);
    const one = await fx.read(async (s) => (await s.listSnapshots({ runId })).find((x) => x.checkpoint === 'step:0:one')!);
    const reason = lastJson<Summary>(parked).reason;
    // Before deciding, the operator reads that the sandbox is gone and what can be restored.
    expect(reason).toContain('step deploy (replay never) was in flight');
    expect(reason).toContain('the sandbox is not usable');
    expect(reason).toContain(`${one.id} (step:0:one)`);

    // Keeping an unusable sandbox cannot be carried out: the run stays waiting for a decision.
    const keep = await fx.cli(['reconcile', runId, '--accept', '--json']);
    expect(keep.code, keep.stderr).not.toBe(0);
    expect(await state(fx, runId)).toBe('needs_reconciliation');

    const done = await fx.cli(['reconcile', runId, '--accept', '--restore', one.id, '--json']);
    expect(done.code, done.stderr + done.stdout.slice(-2000)).toBe(0);
    const summary = lastJson<Summary>(done);
    expect(summary.run.state).toBe('completed');
    expect(service.counts()).toEqual({ deploy: 1 });
    // The accepted step is not run again; the run continues after it from the restored state.
    expect(summary.steps.filter((s) => s.step === 'deploy').some((s) => s.alreadyDone)).toBe(true);
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects.filter((e) => (e.intent as { step: string }).step === 'deploy').map((e) => [e.status, (e.receipt as { decision?: string } | null)?.decision])).toEqual([['confirmed', 'accept']]);
  });

  it('leaves the run in needs_reconciliation when the snapshot chosen cannot be restored, and restores another after', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'two', run: 'echo two >> steps.log' },
      { name: 'three', run: 'cat steps.log' },
    ]);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    await removeLiveSandboxes(fx);
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    const newest = snaps.find((s) => s.checkpoint === 'step:1:two')!;
    const older = snaps.find((s) => s.checkpoint === 'step:0:one')!;
    await fx.removeSnapshotImage(newest.id);
    expect((await fx.cli(['resume', runId])).code).toBe(3);

    const bad = await fx.cli(['reconcile', runId, '--restore', newest.id, '--json']);
    expect(bad.code).toBe(3);
    expect(await state(fx, runId)).toBe('needs_reconciliation');
    expect(lastJson<Summary>(bad).reason).toContain(`snapshot image missing: ${newest.id}`);

    const good = await fx.cli(['reconcile', runId, '--restore', older.id, '--json']);
    expect(good.code, good.stderr).toBe(0);
    expect(lastJson<Summary>(good).run.state).toBe('completed');
  });

  it('runs a never step again only when the operator says its effect did not happen (--reject-effect), and refuses to guess', async () => {
    ({ fx, service } = await deployPlan('cat steps.log'));
    fx.allowLeftovers('the kill before the deploy step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const parked = await fx.cli(['resume', runId, '--json']);
    expect(parked.code, parked.stderr).toBe(3);
    expect(lastJson<Summary>(parked).reason).toContain('the sandbox is usable');
    // Continuing needs the answer to "did it happen": a bare --restore does not guess.
    const older = await fx.read(async (s) => (await s.listSnapshots({ runId })).find((x) => x.checkpoint === 'step:0:one')!);
    const guess = await fx.cli(['reconcile', runId, '--restore', older.id, '--json']);
    expect(guess.code).not.toBe(0);
    expect(guess.stderr).toContain('--reject-effect');
    expect(await state(fx, runId)).toBe('needs_reconciliation');

    const done = await fx.cli(['reconcile', runId, '--reject-effect', '--restore', older.id, '--json']);
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<Summary>(done).run.state).toBe('completed');
    expect(service.counts()).toEqual({ deploy: 2 });
    const deploys = await fx.read(async (s) => (await s.listEffects({ runId })).filter((e) => (e.intent as { step: string }).step === 'deploy'));
    expect(deploys.map((e) => e.status)).toEqual(['failed', 'confirmed']);
    // The first deploy's outcome is the operator's word, with who said it (before: `reconciliation: none`, no attempts).
    const exported = await fx.cli(['export', runId]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as { effects: Array<{ id: string; reconciliation: string; attemptLog: Array<{ outcome: string; settledBy: string | null; actor: string | null }> }> };
    const rejected = record.effects.find((e) => e.id === deploys[0]!.id)!;
    expect(rejected.reconciliation).toBe('operator_decision');
    expect(rejected.attemptLog.map((a) => [a.outcome, a.settledBy])).toEqual([['not_applied', 'operator']]);
    expect(rejected.attemptLog[0]!.actor).toMatch(/^user:/);
    expect(record.effects.find((e) => e.id === deploys[1]!.id)!.attemptLog.map((a) => [a.outcome, a.settledBy])).toEqual([['applied', 'reply']]);
  });

  it('fails a run with an uncertain never step on --fail alone: the effect is left uncertain, never run again, and the run says so', async () => {
    ({ fx, service } = await deployPlan('cat steps.log'));
    fx.allowLeftovers('the kill before the deploy step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect((await fx.cli(['resume', runId, '--json'])).code).toBe(3);
    const deployId = await fx.read(async (s) => (await s.listEffects({ runId })).find((e) => (e.intent as { step: string }).step === 'deploy')!.id);

    // Before: exit 1, "effect_answer_needed: run RUN has 1 effect(s) that may or may not have happened (...): add --accept if they did, --reject-effect if they did not".
    const failed = await fx.cli(['reconcile', runId, '--fail', '--json']);
    expect(failed.code, failed.stderr).toBe(0);
    const out = lastJson<{ run: Run; leftUncertain: string[] }>(failed);
    expect(out.run.state).toBe('failed');
    expect(out.leftUncertain).toEqual([deployId]);
    const human = await fx.cli(['show', runId]);
    expect(human.stdout).toContain(`left uncertain: ${deployId}`);
    const deploy = await fx.read(async (s) => (await s.listEffects({ runId })).find((e) => e.id === deployId)!);
    expect(deploy.status).toBe('unknown');
    // Failed for good: nothing resumes it, and the deploy ran once.
    expect((await fx.cli(['resume', runId])).code).not.toBe(0);
    expect(service.counts()).toEqual({ deploy: 1 });
    expect(await state(fx, runId)).toBe('failed');
  });
  it('a host killed right after reconcile --fail commits leaves the run failed with its root task waiting; berth gc settles the task and releases the sandbox, and berth check passes', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'deploy', run: 'echo deployed >> steps.log', replay: 'never' },
    ]);
    fx.allowLeftovers('the kill before the deploy step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect((await fx.cli(['resume', runId, '--json'])).code).toBe(3);

    const killed = await fx.cli(['reconcile', runId, '--fail', '--json'], { BERTH_FAULT: 'after:reconcile.fail' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const root = async () => fx!.read(async (s) => (await s.getTask((await s.getRun(runId))!.rootTaskId!))!);
    expect(await state(fx, runId)).toBe('failed');
    expect((await root()).status).toBe('waiting');
    expect((await fx.cli(['check', runId])).stderr).toContain('final_run_settled');

    // Before: gc removed the container and left the root waiting (berth check: final_run_settled).
    const gc = await fx.cli(['gc', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    expect(await root()).toMatchObject({ status: 'terminal', outcome: 'cancelled' });
    expect(lastJson<{ endedRuns: { settled: string[] } }>(gc).endedRuns.settled).toEqual([runId]);
    expect((await fx.read((s) => s.listLeases({ runId }))).filter((l) => l.releasedAt === null)).toEqual([]);
    expect(await fx.docker.listContainers({ all: true, filters: { label: [`berth.run=${runId}`] } })).toEqual([]);
    const check = await fx.cli(['check', runId]);
    expect(check.code, check.stdout + check.stderr).toBe(0);
    expect(await state(fx, runId)).toBe('failed');
  });

  it("a never step whose sandbox is killed under a live host parks the run saying the step was interrupted and its sandbox is gone, not that the host stopped", async () => {
    fx = await planFixture([{ name: 'hold', run: 'touch began; sleep 60', replay: 'never' }]);
    const f = fx;
    const running = f.cli(['run', f.plan, '--json']);
    const lease = await (async () => {
      for (let waited = 0; ; waited += 100) {
        if (waited > 120_000) throw new Error('the step never started');
        // A lease is recorded before its container exists: only one with a container is looked into.
        const live = existsSync(f.store) ? (await f.read((s) => s.listLeases({}))).find((l) => l.releasedAt === null && l.containerId) : undefined;
        const began = live ? (await containerStdout(f.docker, live.containerId, ['ls', '/workspace'])).includes('began') : false;
        if (live && began) return live;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await f.docker.getContainer(lease.containerId).kill();
    const end = await running;
    expect(end.code, end.stderr).toBe(3);
    const { reason } = lastJson<Summary>(end);
    // Before: "step hold (replay never) was in flight when the host stopped; ..." while the host ran on.
    expect(reason).toMatch(/^step hold \(replay never\) was in flight when it was interrupted; it may or may not have run \(its sandbox is gone/);
    expect(reason).not.toContain('host stopped');
  });
});
