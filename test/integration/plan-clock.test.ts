import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { egressPort } from '../../host/egress';
import { loadPlan, submitPlan, type PlanProgress } from '../../host/plan';
import { createHostRuntime } from '../../host/runtime/host-runtime';
import { SandboxHost, snapshotEngine } from '../../host/sandbox';
import { openSqliteStore } from '../../host/store';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('a plan run under a clock that steps backwards', { timeout: 180_000 }, () => {
  it('judges each step by its own result, not by the child task created last by wall clock', async () => {
    fx = await planFixture([
      { name: 'first', run: 'echo first' },
      { name: 'second', run: 'echo second; exit 3' },
      { name: 'third', run: 'echo third' },
    ]);
    // The machine's clock is set back an hour while the first step runs (an NTP correction):
    // the second step's task is created "before" the first one.
    let offset = 0;
    const clock = { now: () => Date.now() + offset };
    const onProgress = (p: PlanProgress) => {
      if (p.type === 'step-end' && p.index === 0) offset -= 3_600_000;
    };
    const logger = pino({ level: 'silent' });
    const store = openSqliteStore(fx.store, { clock });
    const sandbox = new SandboxHost({ docker: fx.docker, records: store, clock, logger, hostId: fx.hostId, egress: egressPort(store, logger) });
    const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(fx.docker), clock, logger, hostId: fx.hostId, onProgress });
    try {
      await rt.kernel.start();
      const { run } = await submitPlan(rt, await loadPlan(fx.plan));
      const done = await rt.kernel.waitForRun(run.id);
      const steps = (await store.listTasks({ runId: run.id })).filter((t) => t.kind === 'plan-step');
      // The clock did step back: the second step's task looks older than the first's.
      const byIndex = (i: number) => steps.find((t) => (t.input as { index: number }).index === i)!;
      expect(byIndex(1).createdAt).toBeLessThan(byIndex(0).createdAt);
      expect(done.state).toBe('failed');
      expect(steps.map((t) => (t.input as { index: number }).index).sort()).toEqual([0, 1]);
      const transitions = await store.listRunTransitions(run.id);
      expect(transitions.at(-1)!.reason).toContain('step second failed');
    } finally {
      await rt.kernel.stop();
      await store.close();
    }
  });
});
