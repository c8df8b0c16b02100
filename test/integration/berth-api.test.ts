import { afterEach, describe, expect, it } from 'vitest';
import { Berth } from '../../host/index';
import { finishedStepCounts, stepRunning, waitFor } from '../support/fleet';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('the in-process host API', { timeout: 300_000 }, () => {
  it('a drive stopped by its AbortSignal decides nothing: the run keeps its state and sandbox, and a later drive of a new host finishes it with every step once', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'slow', run: 'sleep 3 && echo slow >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    let runId: string;
    {
      await using berth = await Berth.open({ store: fx.store, hostId: fx.hostId });
      const { run } = await berth.submitPlan(fx.plan, { requestId: 'api-1' });
      runId = run.id;
      const stop = new AbortController();
      const driving = berth.drive(run.id, { signal: stop.signal });
      await waitFor('step slow to run', () => stepRunning(fx!, run.id, 1));
      stop.abort();
      const stopped = await driving;
      expect(stopped.settled).toBe(false);
      expect(stopped.run.state).toBe('running');
    }
    await using again = await Berth.open({ store: fx.store, hostId: fx.hostId });
    const end = await again.drive(runId);
    expect(end).toMatchObject({ settled: true, run: { state: 'completed' } });
    expect(await finishedStepCounts(fx, runId)).toEqual({ one: 1, slow: 1, three: 1 });
    // Run end applied by the API: the run's sandbox is released.
    const leases = await fx.read((s) => s.listLeases({ runId }));
    expect(leases.every((l) => l.releasedAt !== null)).toBe(true);
  });
});
