import { appendFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { lastJson, planFixture, type PlanStepDef } from '../support/plan-fixture';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string; stdoutTail: string }> };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** A plan under `snapshot.policy: on-demand`: only the upload is snapshotted; later steps only advance the digest. */
async function onDemand(steps: PlanStepDef[]) {
  const f = await planFixture(steps);
  appendFileSync(`${f.dir}/env.yaml`, 'snapshot: { policy: on-demand }\n');
  return f;
}

/** Runs until the host is killed after step `n` committed, then removes the run's sandbox as if the engine lost it. */
async function killAfterStepAndRemoveSandbox(f: NonNullable<typeof fx>, n: number): Promise<string> {
  const first = await f.cli(['run', f.plan, '--json'], { BERTH_FAULT: `after:phase.complete:plan-step#${n}` });
  expect(first.signal, first.stderr).toBe('SIGKILL');
  for (const l of await f.read((s) => s.listLeases({}))) {
    if (l.releasedAt === null) await f.docker.getContainer(l.containerId).remove({ force: true }).catch(() => {});
  }
  return f.read(async (s) => (await s.listRuns())[0]!.id);
}

describe('snapshot.policy on-demand never rolls completed steps back silently', { timeout: 300_000 }, () => {
  it('re-runs the safe steps after the upload snapshot when the sandbox is lost, ending with every step\'s files', async () => {
    fx = await onDemand([
      { name: 'one', run: 'echo 1 > a' },
      { name: 'two', run: 'echo 2 > b' },
      { name: 'three', run: 'ls' },
    ]);
    const runId = await killAfterStepAndRemoveSandbox(fx, 2);
    const end = await fx.cli(['resume', runId, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const summary = lastJson<Summary>(end);
    expect(summary.run.state).toBe('completed');
    // The last step sees what the first two made.
    expect(summary.steps.findLast((s) => s.step === 'three')!.stdoutTail).toBe('README\na\nb\n');
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects.filter((e) => e.status === 'confirmed').map((e) => (e.intent as { step: string }).step).sort()).toEqual(['one', 'one', 'three', 'two', 'two']);
  });

  it('asks for reconciliation, naming the never step whose changes a restore would lose', async () => {
    fx = await onDemand([
      { name: 'one', run: 'echo 1 > a' },
      { name: 'deploy', run: 'echo 2 > b', replay: 'never' },
      { name: 'three', run: 'ls' },
    ]);
    const runId = await killAfterStepAndRemoveSandbox(fx, 2);
    const end = await fx.cli(['resume', runId, '--json']);
    expect(end.code, end.stderr).toBe(3);
    const summary = lastJson<Summary>(end);
    expect(summary.run.state).toBe('needs_reconciliation');
    expect(summary.reason).toMatch(/would lose the changes of steps one, deploy/);
    expect(summary.reason).toContain('deploy is replay never');
    const deploys = await fx.read(async (s) => (await s.listEffects({ runId })).filter((e) => (e.intent as { step: string }).step === 'deploy'));
    expect(deploys).toHaveLength(1);
  });
});
