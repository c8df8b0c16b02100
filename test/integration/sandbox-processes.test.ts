import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';

type Fixture = Awaited<ReturnType<typeof planFixture>>;
let fx: Fixture | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** Exits 1 (and says so) when a `sleep 600` is running in the sandbox; `[0]` keeps grep from matching itself. */
const NO_LEFTOVER = 'if ps | grep -q "sleep 60[0]"; then echo "leftover: $(ps | grep "sleep 60[0]")"; exit 1; fi; echo clean';
const HAS_SERVICE = 'ps | grep -q "sleep 60[0]" && echo service-running';

interface Summary {
  run: { id: string; state: string };
  steps: Array<{ step: string; exitCode: number; outcome: string }>;
}

describe('no process outlives its step', { timeout: 240_000 }, () => {
  it('kills a background `sleep 600 &` of step 1 when step 1 ends, so step 2 starts without it', async () => {
    fx = await planFixture([
      { name: 'spawn', run: 'sleep 600 & echo started' },
      { name: 'check', run: NO_LEFTOVER },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-2000) + end.stdout.slice(-2000)).toBe(0);
    expect(lastJson<Summary>(end).run.state).toBe('completed');
  });

  it('kills what a step that failed or timed out left in the background too', async () => {
    fx = await planFixture([
      { name: 'spawn-and-fail', run: 'sleep 600 & exit 3' },
      { name: 'check', run: NO_LEFTOVER },
    ]);
    // allowFailure lets the plan go on to the check after the failed step.
    writeFileSync(
      fx.plan,
      `name: fixture\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: spawn-and-fail\n    run: ${JSON.stringify('sleep 600 & exit 3')}\n    allowFailure: true\n  - name: spawn-and-time-out\n    run: ${JSON.stringify('sleep 600 & sleep 30')}\n    timeoutS: 1\n    allowFailure: true\n  - name: check\n    run: ${JSON.stringify(NO_LEFTOVER)}\n`,
    );
    const end = await fx.cli(['run', fx.plan, '--json']);
    const summary = lastJson<Summary>(end);
    expect(summary.steps.map((s) => [s.step, s.exitCode]), end.stderr.slice(-2000)).toEqual([
      ['spawn-and-fail', 3],
      ['spawn-and-time-out', expect.any(Number)],
      ['check', 0],
    ]);
  });

  it('keeps a long-lived service only for a step that says keepProcesses: true, and records that on the run', async () => {
    fx = await planFixture([{ name: 'placeholder', run: 'true' }]);
    writeFileSync(
      fx.plan,
      `name: fixture\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: service\n    run: ${JSON.stringify('sleep 600 & echo started')}\n    keepProcesses: true\n  - name: use\n    run: ${JSON.stringify(HAS_SERVICE)}\n`,
    );
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-2000) + end.stdout.slice(-2000)).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const root = await fx.read(async (s) => (await s.listTasks({ runId })).find((t) => t.kind === 'plan')!);
    const steps = (root.input as { plan: { steps: Array<{ name: string; keepProcesses?: boolean }> } }).plan.steps;
    expect(steps.map((s) => [s.name, s.keepProcesses])).toEqual([
      ['service', true],
      ['use', false],
    ]);
  });
});
