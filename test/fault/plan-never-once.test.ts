import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { startCountingService } from '../support/counting-service';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { lastJson, planFixture } from '../support/plan-fixture';
import { deployPlan as sharedDeployPlan } from '../support/deploy-plan';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string }> };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let service: Awaited<ReturnType<typeof startCountingService>> | undefined;
afterEach(async () => {
  await service?.close();
  await fx?.cleanup();
  fx = undefined;
  service = undefined;
});

/** The shared deploy plan, kept in this file's variables so afterEach cleans it up. */
async function deployPlan() {
  ({ fx, service } = await sharedDeployPlan());
  return { fx: fx!, service: service! };
}

/** Drives the run to its end the way an operator would: resume, and `--accept` whenever it parks. */
async function operatorFinishes(f: NonNullable<typeof fx>, runId: string): Promise<Run> {
  for (let i = 0; i < 4; i++) {
    const run = (await f.read((s) => s.getRun(runId)))!;
    if (run.state === 'completed' || run.state === 'failed' || run.state === 'cancelled') return run;
    const end = run.state === 'needs_reconciliation' ? await f.cli(['reconcile', runId, '--accept', '--json']) : await f.cli(['resume', runId, '--json']);
    expect(end.signal, end.stderr).toBeNull();
  }
  return (await f.read((s) => s.getRun(runId)))!;
}

describe('a replay-never step whose effect happened is never executed again', { timeout: 300_000 }, () => {
  it('runs exactly once when the snapshot after it fails with a retryable error', async () => {
    const { fx, service } = await deployPlan();
    // Snapshots: upload (1), one (2), deploy (3).
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT_ERROR: 'snapshot.take#3' });
    expect(first.signal, first.stderr).toBeNull();
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const run = await operatorFinishes(fx, runId);
    expect(service.counts()).toEqual({ deploy: 1 });
    expect(run.state).toBe('completed');
    // Without a host restart the retry just takes the snapshot again: nothing to reconcile.
    expect(lastJson<Summary>(first).run.state).toBe('completed');
    const deploys = await fx.read(async (s) => (await s.listEffects({ runId })).filter((e) => (e.intent as { step: string }).step === 'deploy'));
    expect(deploys.map((e) => [e.status, e.attempts])).toEqual([['confirmed', 1]]);
  });

  it('runs exactly once when the snapshot fails and the host is then killed during the retry of that snapshot', async () => {
    const { fx, service } = await deployPlan();
    fx.allowLeftovers('the kill after snapshot.take#3 leaves the deploy snapshot image whose record never commits; by design (issue 12.2) `berth gc` removes such an image after its grace period, not the run\'s end', unrecordedSnapshotImages);
    // The retry's snapshot is the 3rd that gets as far as the image commit.
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT_ERROR: 'snapshot.take#3', BERTH_FAULT: 'after:snapshot.take#3' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect(service.counts()).toEqual({ deploy: 1 });
    const run = await operatorFinishes(fx, runId);
    expect(service.counts()).toEqual({ deploy: 1 });
    expect(run.state).toBe('completed');
    const deploys = await fx.read(async (s) => (await s.listEffects({ runId })).filter((e) => (e.intent as { step: string }).step === 'deploy'));
    expect(deploys.map((e) => e.status)).toEqual(['confirmed']);
  });

  it('runs exactly once when it was in flight and the resume finds the kernel outside the environment\'s compatible range', async () => {
    const { fx, service } = await deployPlan();
    fx.allowLeftovers('the kill after snapshot.take#3 leaves the deploy snapshot image whose record never commits; by design (issue 12.2) `berth gc` removes such an image after its grace period, not the run\'s end', unrecordedSnapshotImages);
    // Killed during deploy's snapshot: its effect is still `executing`.
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:snapshot.take#3' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    // The stored environment now names a kernel and range this kernel is not in (as after a kernel
    // downgrade). Both change together: a manifest's range must include its own kernel version.
    const db = new Database(fx.store);
    db.prepare("UPDATE tasks SET input_json = json_set(input_json, '$.environment.kernel.version', '0.2.0', '$.environment.kernel.compatible', '>=0.2.0') WHERE kind = 'plan'").run();
    db.close();
    const parked = await fx.cli(['resume', runId, '--json']);
    expect(parked.code, parked.stderr).toBe(3);
    const run = await operatorFinishes(fx, runId);
    expect(service.counts()).toEqual({ deploy: 1 });
    expect(run.state).toBe('completed');
  });

  it('runs exactly once when the sandbox it changed is lost before its snapshot, and the run finishes from an older snapshot', async () => {
    const { fx, service } = await deployPlan();
    fx.allowLeftovers('the kill after snapshot.take#3 leaves the deploy snapshot image whose record never commits; by design (issue 12.2) `berth gc` removes such an image after its grace period, not the run\'s end', unrecordedSnapshotImages);
    // The first snapshot attempt fails (the receipt commits with the retry), the retry is killed:
    // the effect is confirmed, its snapshot missing. Then the sandbox goes too.
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT_ERROR: 'snapshot.take#3', BERTH_FAULT: 'after:snapshot.take#3' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    for (const l of await fx.read((s) => s.listLeases({}))) {
      if (l.releasedAt === null) await fx.docker.getContainer(l.containerId).remove({ force: true }).catch(() => {});
    }
    const parked = await fx.cli(['resume', runId, '--json']);
    expect(parked.code, parked.stderr).toBe(3);
    expect(lastJson<Summary>(parked).reason).toContain('ran and its effect is confirmed, but the sandbox it changed is gone');
    const one = await fx.read(async (s) => (await s.listSnapshots({ runId })).find((x) => x.checkpoint === 'step:0:one')!);
    const done = await fx.cli(['reconcile', runId, '--restore', one.id, '--json']);
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<Summary>(done).run.state).toBe('completed');
    expect(service.counts()).toEqual({ deploy: 1 });
  });
});
