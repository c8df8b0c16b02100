import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { sandboxDocId } from '../../host/run-sandbox';
import type { Store } from '../../host/store';
import { startCountingService } from '../support/counting-service';
import { deployPlan } from '../support/deploy-plan';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { lastJson, planFixture, type PlanStepDef } from '../support/plan-fixture';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string; stdoutTail: string }> };
type Tree = { runId: string; state: string; forkedFrom: { runId: string; checkpoint: string } | null; children: Tree[] };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let service: Awaited<ReturnType<typeof startCountingService>> | undefined;
afterEach(async () => {
  await service?.close();
  await fx?.cleanup();
  fx = undefined;
  service = undefined;
});

/** The workspace digest a run's sandbox pointer committed last: what its final workspace was. */
async function finalDigest(s: Store, runId: string): Promise<string | null> {
  const doc = await s.getDocument(sandboxDocId(runId));
  let state = { ...(doc?.baseline as object) } as { workspaceDigest?: string | null };
  for (const o of doc?.ops ?? []) state = { ...state, ...(o.op as object) };
  return state.workspaceDigest ?? null;
}

const STEPS: PlanStepDef[] = [
  { name: 'one', run: 'echo 1 > a' },
  { name: 'two', run: 'echo 2 > b' },
  { name: 'three', run: 'cat a b > c && ls' },
];

describe('berth fork continues a run from a checkpoint with its sandbox', { timeout: 600_000 }, () => {
  it('forks at every checkpoint of a finished run: each fork runs only the remaining steps and ends with the same workspace', async () => {
    fx = await planFixture(STEPS);
    const first = await fx.cli(['run', fx.plan, '--json']);
    expect(first.code, first.stderr).toBe(0);
    const original = lastJson<Summary>(first).run.id;
    const want = await fx.read((s) => finalDigest(s, original));
    expect(want).toMatch(/^sha256:/);
    const names = STEPS.map((s) => s.name);
    for (const [at, from] of [['upload', 0], ['one', 1], ['two', 2], ['three', 3]] as const) {
      const end = await fx.cli(['fork', original, '--at', at, '--json']);
      expect(end.code, `fork --at ${at}: ${end.stderr}`).toBe(0);
      const summary = lastJson<Summary>(end);
      expect(summary.run.state).toBe('completed');
      expect(summary.steps.map((s) => s.step), `fork --at ${at}`).toEqual(names.slice(from));
      expect(await fx.read((s) => finalDigest(s, summary.run.id)), `fork --at ${at}`).toBe(want);
      const first = (await fx.read((s) => s.listRunTransitions(summary.run.id)))[0]!;
      expect(first.reason).toContain(`forked from run ${original}`);
      expect(first.actor).toBe('user:tester');
    }
    // The original is untouched: its steps ran once each.
    const effects = await fx.read((s) => s.listEffects({ runId: original }));
    expect(effects.map((e) => (e.intent as { step: string }).step)).toEqual(names);
  });

  it('completes a failed plan from the step before the failure with a fixed --plan; the original stays failed; tree shows both', async () => {
    fx = await planFixture([...STEPS.slice(0, 2), { name: 'check', run: 'test -f missing' }]);
    const first = await fx.cli(['run', fx.plan, '--json']);
    expect(first.code).toBe(1);
    const original = lastJson<Summary>(first).run.id;
    const fixed = `${fx.dir}/fixed.yaml`;
    writeFileSync(fixed, readFileSync(fx.plan, 'utf8').replace('test -f missing', 'test -f b && cat b'));
    const end = await fx.cli(['fork', original, '--at', 'two', '--plan', fixed, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const fork = lastJson<Summary>(end);
    expect(fork.run.state).toBe('completed');
    expect(fork.steps.map((s) => [s.step, s.stdoutTail])).toEqual([['check', '2\n']]);
    expect((await fx.read((s) => s.getRun(original)))!.state).toBe('failed');
    const tree = lastJson<Tree>(await fx.cli(['tree', fork.run.id, '--json']));
    expect(tree.runId).toBe(original);
    expect(tree.state).toBe('failed');
    expect(tree.children.map((c) => [c.runId, c.state, c.forkedFrom?.checkpoint])).toEqual([[fork.run.id, 'completed', 'step:1:two']]);
  });

  it('refuses a --plan that changes a step before the fork point, a pruned checkpoint and an unknown run, writing nothing', async () => {
    fx = await planFixture(STEPS);
    const first = await fx.cli(['run', fx.plan, '--json']);
    const original = lastJson<Summary>(first).run.id;
    const changed = `${fx.dir}/changed.yaml`;
    writeFileSync(changed, readFileSync(fx.plan, 'utf8').replace('echo 1 > a', 'echo one > a'));
    const bad = await fx.cli(['fork', original, '--at', 'two', '--plan', changed]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('steps[0] is before the fork point');
    expect(bad.stderr).toContain('echo one > a');
    // Prune everything but the newest snapshot of the session: forking after step one names what is left.
    expect((await fx.cli(['gc', '--keep', '1'])).code).toBe(0);
    const pruned = await fx.cli(['fork', original, '--at', 'one']);
    expect(pruned.code).toBe(1);
    expect(pruned.stderr).toMatch(/snapshot snap_\S+ \(step:0:one\) of run \S+ was pruned/);
    expect(pruned.stderr).toMatch(/forkable: snap_\S+ \(step:2:three\)/);
    const missing = await fx.cli(['fork', 'run_nope', '--at', 'one']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no run run_nope');
    expect(await fx.read((s) => s.listRuns())).toHaveLength(1);
  });

  it('never runs a never step before the fork point again, and carries an uncertain one into the fork for reconciliation', async () => {
    ({ fx, service } = await deployPlan('cat steps.log'));
    const done = await fx.cli(['run', fx.plan, '--json']);
    expect(done.code, done.stderr).toBe(0);
    const finished = lastJson<Summary>(done).run.id;
    expect(service.counts()).toEqual({ deploy: 1 });
    const after = await fx.cli(['fork', finished, '--at', 'deploy', '--json']);
    expect(after.code, after.stderr).toBe(0);
    expect(lastJson<Summary>(after).steps.map((s) => [s.step, s.stdoutTail])).toEqual([['three', 'one\ndeployed\n']]);
    expect(service.counts()).toEqual({ deploy: 1 });

    // A second run killed with deploy in flight: whether it reached the service is unknown to Berth.
    const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    fx.allowLeftovers('the kill before deploy\'s commit leaves its snapshot image unrecorded; `berth gc` removes it after its grace period', unrecordedSnapshotImages);
    expect(service.counts()).toEqual({ deploy: 2 });
    const parked = (await fx.read((s) => s.listRuns())).find((r) => r.id !== finished && !r.id.startsWith(lastJson<Summary>(after).run.id))!;
    const fork = await fx.cli(['fork', parked.id, '--at', 'one', '--json']);
    expect(fork.code, fork.stderr).toBe(3);
    const forked = lastJson<Summary>(fork);
    expect(forked.run.state).toBe('needs_reconciliation');
    expect(forked.reason).toContain(`may have run as ${parked.id}:step:1:g0 in run ${parked.id}`);
    expect(service.counts()).toEqual({ deploy: 2 });
    // The operator says it happened: the fork goes on after it without sending again.
    const settled = await fx.cli(['reconcile', forked.run.id, '--accept', '--json']);
    expect(settled.code, settled.stderr).toBe(0);
    expect(lastJson<Summary>(settled).run.state).toBe('completed');
    expect(service.counts()).toEqual({ deploy: 2 });
  });
});

describe('forks and retention', { timeout: 600_000 }, () => {
  it('keeps the snapshot a detached fork starts from through gc, and gc --forks-older-than removes finished forks\' snapshots only', async () => {
    fx = await planFixture(STEPS);
    const first = await fx.cli(['run', fx.plan, '--json']);
    const original = lastJson<Summary>(first).run.id;
    const want = await fx.read((s) => finalDigest(s, original));
    const detached = await fx.cli(['fork', original, '--at', 'one', '--detach', '--json']);
    expect(detached.code, detached.stderr).toBe(0);
    const { runId: forkId, forkedFrom } = lastJson<{ runId: string; forkedFrom: { snapshotId: string } }>(detached);
    expect((await fx.read((s) => s.getRun(forkId)))!.state).toBe('admitted');
    const gc = lastJson<{ pruned: string[] }>(await fx.cli(['gc', '--keep', '0', '--json']));
    expect(gc.pruned.length).toBeGreaterThan(0);
    expect(gc.pruned).not.toContain(forkedFrom.snapshotId);
    const end = await fx.cli(['resume', forkId, '--json']);
    expect(end.code, end.stderr).toBe(0);
    expect(await fx.read((s) => finalDigest(s, forkId))).toBe(want);
    const shown = lastJson<{ forkedFrom: { runId: string }; forks: unknown[] }>(await fx.cli(['show', forkId, '--json']));
    expect(shown.forkedFrom.runId).toBe(original);
    expect(lastJson<{ forks: Array<{ runId: string }> }>(await fx.cli(['show', original, '--json'])).forks.map((f) => f.runId)).toEqual([forkId]);
    const forkSnaps = (await fx.read((s) => s.listSnapshots({ runId: forkId }))).map((s) => s.id);
    expect(forkSnaps).toHaveLength(2);
    const removed = lastJson<{ forks: Array<{ runId: string; snapshots: string[] }> }>(await fx.cli(['gc', '--forks-older-than', '0s', '--json']));
    expect(removed.forks).toEqual([{ runId: forkId, snapshots: forkSnaps }]);
    expect((await fx.read((s) => s.listSnapshots({ runId: forkId }))).every((s) => s.prunedAt !== null)).toBe(true);
    const bad = await fx.cli(['gc', '--forks-older-than', 'soon']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--forks-older-than expects a duration');
  });

  it('a second gc --forks-older-than finds nothing left of the forks it collected, and says they were collected before', async () => {
    fx = await planFixture(STEPS);
    const first = await fx.cli(['run', fx.plan, '--json']);
    const original = lastJson<Summary>(first).run.id;
    const forked = await fx.cli(['fork', original, '--at', 'two', '--json']);
    expect(forked.code, forked.stderr).toBe(0);
    const forkId = lastJson<Summary>(forked).run.id;
    type Gc = { forks: Array<{ runId: string; snapshots: string[] }>; forksCollectedBefore: number };
    const once = lastJson<Gc>(await fx.cli(['gc', '--forks-older-than', '0s', '--json']));
    expect(once.forks.map((f) => f.runId)).toEqual([forkId]);
    expect(once.forks[0]!.snapshots.length).toBeGreaterThan(0);
    expect(once.forksCollectedBefore).toBe(0);
    // Before: {"runId": FORK, "snapshots": []} again, and "finished forks: 1, their 0 snapshot(s) removed (FORK)".
    const twice = lastJson<Gc>(await fx.cli(['gc', '--forks-older-than', '0s', '--json']));
    expect(twice.forks).toEqual([]);
    expect(twice.forksCollectedBefore).toBe(1);
    const human = await fx.cli(['gc', '--forks-older-than', '0s']);
    expect(human.stdout).toContain('no finished forks that old with snapshots left to remove (1 collected before)');
    expect(human.stdout).not.toContain(forkId);
  });
});
