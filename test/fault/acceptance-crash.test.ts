import { describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { lastJson, planFixture } from '../support/plan-fixture';

// The acceptance command appends to a log in the workspace, so a second run of it on the restored
// sandbox shows once (safe replay from the last snapshot), never twice on top of the first.
const STEPS = [{ name: 'build', run: 'echo build >> steps.log' }];

// Killed with the acceptance command's `executing` mark committed (before it ran), and after it ran
// (its snapshot image made, nothing recorded: upload, build, then acceptance is the third snapshot).
const TARGETS = ['after:effect.begin:plan-step#2', 'after:snapshot.take#3'];

describe('acceptance command killed mid-run', () => {
  it.each(TARGETS)('resumes the acceptance command like a safe step after a kill at %s, on the restored sandbox, and records one decision', { timeout: 300_000 }, async (target) => {
    const fx = await planFixture(STEPS);
    fx.allowLeftovers('a kill may leave a snapshot image whose record never committed (gc removes it)', unrecordedSnapshotImages);
    try {
      const { appendFileSync } = await import('node:fs');
      appendFileSync(fx.plan, 'acceptance:\n  command: "echo accept >> steps.log; grep -c accept steps.log; test $(grep -c accept steps.log) -eq 1"\n');
      const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: target });
      expect(killed.signal, killed.stderr).toBe('SIGKILL');
      const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
      expect(await fx.read((s) => s.listAcceptance({ runId }))).toEqual([]);
      const resumed = await fx.cli(['resume', runId, '--json']);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(lastJson<{ run: Run }>(resumed).run.state).toBe('completed');
      const decisions = await fx.read((s) => s.listAcceptance({ runId }));
      expect(decisions.map((d) => [d.decision, d.actor, (d.evidence as { exitCode: number }).exitCode])).toEqual([['accepted', 'acceptance-command', 0]]);
      const effects = await fx.read((s) => s.listEffects({ runId }));
      expect(effects.map((e) => e.status)).toEqual(['confirmed', 'confirmed']);
      // Recovery work shows in the run's cost: the sandbox went back to the build step's snapshot
      // (a safe step in flight resumes from there) and the acceptance command ran again.
      const shown = lastJson<{ cost: { recovery: { stepsRerun: number; restores: number } } }>(await fx.cli(['show', runId, '--json']));
      expect(shown.cost.recovery).toEqual({ stepsRerun: 1, restores: 1 });
    } finally {
      await fx.cleanup();
    }
  });
});
