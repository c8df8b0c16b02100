import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { unrecordedSnapshotImages } from '../support/leak-check';

/**
 * The phases taken off a run's critical path (issue 29): the sandbox's release, which the final
 * commit starts in the background; retention (prune) after the outcome is printed; and the
 * upload, built as a layer of the sandbox's image (killed before the engine loaded it, and after the
 * lease from it), right before its first snapshot is recorded. A real `berth run` killed with SIGKILL inside each
 * resumes (`berth resume`) to the uninterrupted run's final workspace, with nothing left behind.
 */
const STEPS = [
  { name: 'build', run: 'echo build >> steps.log && mkdir -p out && head -c 20000 /dev/zero > out/lib.a' },
  { name: 'test', run: 'echo test >> steps.log && test -s out/lib.a' },
];

let fixtures: Array<Awaited<ReturnType<typeof planFixture>>> = [];
afterEach(async () => {
  const mine = fixtures;
  fixtures = [];
  for (const f of mine) await f.cleanup();
}, 240_000);

async function fixture() {
  const fx = await planFixture(STEPS);
  fixtures.push(fx);
  return fx;
}

describe('a run killed in a phase moved off the critical path resumes to the same final workspace', { timeout: 600_000 }, () => {
  // Not run-end:release: a completing plan releases its sandbox before the completion commits (a
  // host killed right after it must leave no sandbox of a finished run), so for a plan run that
  // point has nothing left to release and is never reached.
  it.each(['plan:upload-layer', 'plan:uploaded', 'run-end:prune'])('killed at %s: berth resume ends completed with the uninterrupted digest, its sandbox released', async (target) => {
    const base = await fixture();
    const clean = await base.cli(['run', base.plan, '--json']);
    expect(clean.code, clean.stderr).toBe(0);
    const expected = await base.read(async (s) => (await s.listSnapshots({})).at(-1)!.workspaceDigest);

    const fx = await fixture();
    // Killed between an image's commit and its record's, an image is left for gc (issue 12.2).
    fx.allowLeftovers(`killed at ${target}: a snapshot image whose record never committed is gc's`, unrecordedSnapshotImages);
    const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: target });
    expect(killed.signal, `${killed.code} ${killed.stderr.slice(-800)}`).toBe('SIGKILL');
    const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);

    const run = await fx.read((s) => s.getRun(runId));
    expect(run!.state).toBe('completed');
    const newest = await fx.read(async (s) => (await s.listSnapshots({ runId })).at(-1)!);
    expect(newest.checkpoint).toBe('step:1:test');
    expect(newest.workspaceDigest).toBe(expected);
    // Each step ran once on the resumed path too (a safe step re-run from a snapshot appends once).
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects.map((e) => e.status)).toEqual(['confirmed', 'confirmed']);
    // The sandbox is gone and its lease released, whatever phase the kill hit.
    const leases = await fx.read((s) => s.listLeases({ runId }));
    expect(leases.length).toBeGreaterThan(0);
    expect(leases.filter((l) => l.releasedAt === null)).toEqual([]);
    const containers = await fx.docker.listContainers({ all: true, filters: { label: [`berth.run=${runId}`] } });
    expect(containers).toEqual([]);
  });
});
