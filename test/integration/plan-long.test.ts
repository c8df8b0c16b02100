import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { egressPort } from '../../host/egress';
import { loadPlan, submitPlan, type PlanProgress } from '../../host/plan';
import { createHostRuntime } from '../../host/runtime/host-runtime';
import { SandboxHost, snapshotEngine } from '../../host/sandbox';
import { openSqliteStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { countingStore } from '../support/counting-store';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
// Removing a long run's snapshot tags one at a time takes a while on a loaded engine.
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 600_000);

const STEPS = 60;

describe('a long plan run', { timeout: 600_000 }, () => {
  it('reads about as many rows for its last steps as for its first ones: nothing on a step\'s path lists what the run has accumulated', async () => {
    fx = await planFixture(Array.from({ length: STEPS }, (_, i) => ({ name: `s${i}`, run: `echo ${i}` })));
    const logger = pino({ level: 'silent' });
    const raw = openSqliteStore(fx.store);
    const counting = countingStore(raw);
    // Rows read so far, by method, at each step's end.
    const at: Array<Map<string, number>> = [];
    const onProgress = (p: PlanProgress) => {
      if (p.type === 'step-end') at[p.index] = new Map(counting.rows);
    };
    const sandbox = new SandboxHost({ docker: fx.docker, records: raw, clock: systemClock, logger, hostId: fx.hostId, egress: egressPort(raw, logger) });
    const rt = createHostRuntime({ store: counting.store, sandbox, engine: snapshotEngine(fx.docker), clock: systemClock, logger, hostId: fx.hostId, onProgress });
    try {
      await rt.kernel.start();
      const { run } = await submitPlan(rt, await loadPlan(fx.plan));
      const done = await rt.kernel.waitForRun(run.id);
      expect(done.state).toBe('completed');
    } finally {
      await rt.kernel.stop();
      await raw.close();
    }
    // List reads between the ends of steps `from` and `to`, by method, leaving out the scheduler's
    // read of the active tasks (a poll on a timer: its count follows the wall clock, and it reads
    // only tasks that are not terminal, a bounded set) and in-run retention's read of the newest
    // snapshots (a background pass every 48 commits, off the step's path, reading at most
    // keepLast + 96 rows however long the run: which window a pass falls in is chance).
    const between = (from: number, to: number) => {
      const out = new Map<string, number>();
      for (const [k, v] of at[to]!) if (k !== 'listTasks:active' && k !== 'listSnapshots:newest') out.set(k, v - (at[from]!.get(k) ?? 0));
      return out;
    };
    const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    const early = between(5, 25);
    const late = between(STEPS - 21, STEPS - 1);
    const report = `early ${JSON.stringify([...early])}, late ${JSON.stringify([...late])}`;
    // Before: the plan root listed every step task twice per step (its wait, and the step it had
    // spawned), so the last 20 of 60 steps read 3,690 task rows against 1,197 for steps 5-25.
    expect(sum(late), report).toBeLessThanOrEqual(sum(early) + 20);
  });
});
