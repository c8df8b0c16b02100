import { afterAll, describe, expect, it } from 'vitest';
import { planFixture, lastJson } from '../support/plan-fixture';
import { startDockerd, stopDockerd } from '../support/dockerd';
import type { Run } from '../../host/model';

// This suite restarts the engine itself, so it runs alone (vitest.engine.config.ts), after the rest.
afterAll(async () => {
  await startDockerd();
});

describe('a Docker engine restart in the middle of a run', () => {
  it('does not lose the run: the host waits for the engine, restores the stopped sandbox and finishes', { timeout: 300_000 }, async () => {
    const fx = await planFixture([
      { name: 'prepare', run: 'echo prepare >> steps.log' },
      { name: 'long', run: 'sleep 6 && echo long >> steps.log' },
      { name: 'after', run: 'echo after >> steps.log && cat steps.log' },
    ]);
    try {
      const running = fx.cli(['run', fx.plan, '--json']);
      // Wait until the long step is executing, then take the engine away under it.
      for (let i = 0; i < 200; i++) {
        const effects = await fx.read((s) => s.listEffects({})).catch(() => []);
        if (effects.some((e) => e.id.includes(':step:1:') && e.status === 'executing')) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await stopDockerd();
      await new Promise((r) => setTimeout(r, 1000));
      await startDockerd();
      const end = await running;
      const run = await fx.read(async (s) => (await s.listRuns())[0]!);
      // Never lost: it either finished or says exactly why it waits.
      const why = await fx.read(async (s) => (await s.listRunTransitions(run.id)).map((t) => `${t.to}: ${t.reason}`).join('\n'));
      expect(['completed', 'needs_reconciliation'], why).toContain(run.state);
      expect(end.code, end.stderr.slice(-2000)).toBe(run.state === 'completed' ? 0 : 3);
      const summary = lastJson<{ run: Run; steps: Array<{ step: string; stdoutTail: string }> }>(end);
      if (run.state === 'completed') {
        expect(summary.steps.at(-1)!.stdoutTail.trim().split('\n')).toEqual(['prepare', 'long', 'after']);
        // The long step ran twice in all: once cut off by the engine, once on the restored sandbox.
        const long = await fx.read(async (s) => (await s.listEffects({})).filter((e) => e.id.includes(':step:1:')));
        expect(long.reduce((n, e) => n + e.attempts, 0)).toBe(2);
        expect(long.every((e) => e.status === 'confirmed')).toBe(true);
      }
    } finally {
      await startDockerd();
      await fx.cleanup();
    }
  });
});
