import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import type { Store } from '../../host/store';
import { requireTinyImage } from '../support/docker-engine';
import { planFixture, lastJson } from '../support/plan-fixture';

/**
 * Issue 32, "show it works": a plan of thousands of steps completes, a kill in its middle resumes,
 * a fork at that point continues with the same workspace and history, and the run's older
 * snapshots are pruned while it goes (never its restore point). The full size is 3,000 steps
 * (minutes); CI runs a sampled size unless BERTH_LONG_TEST_STEPS says otherwise, and the test's
 * name says which size ran.
 */
const FULL = 3000;
// 120 in CI: with 64, the kill at step 32 came before any pass had pruned (a full run, quiet).
const STEPS = Number(process.env.BERTH_LONG_TEST_STEPS ?? 120);
const SIZE = STEPS >= FULL ? `${STEPS}-step` : `${STEPS}-step (SAMPLED; BERTH_LONG_TEST_STEPS=${FULL} runs the full size)`;
if (STEPS < FULL) console.warn(`plan-length.test.ts: ${STEPS} steps, not the issue's ${FULL}: set BERTH_LONG_TEST_STEPS=${FULL} for the full size`);
const KEEP_LAST = 3;
const MIDDLE = Math.floor(STEPS / 2);
const STEP_END = 'after:phase.complete:plan-step';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string; exitCode: number; snapshotId: string | null }> };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
// Removing a long run's snapshot tags takes a while on a loaded engine.
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 900_000);

/** Each step rewrites one of five files: the workspace changes at every step, the same way in every run. */
const steps = Array.from({ length: STEPS }, (_, i) => ({ name: `s${i}`, run: `echo ${i} > f${i % 5}` }));

const lastDigest = async (s: Store, runId: string) => (await s.listSnapshots({ runId, newest: 1 }))[0]!.workspaceDigest;
const live = async (s: Store, runId: string) => (await s.listSnapshots({ runId })).filter((x) => x.prunedAt === null);

describe('a plan run of any length', { timeout: 1_800_000 }, () => {
  it(`a ${SIZE} plan killed in its middle prunes its older snapshots while it runs, resumes to completion, and a fork at the kill point ends with the same workspace; berth check passes`, async () => {
    fx = await planFixture(steps);
    writeFileSync(
      join(fx.dir, 'env.yaml'),
      `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${await requireTinyImage(fx.docker)}" }\nnetwork: { mode: none }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { keepLast: ${KEEP_LAST} }\n`,
    );
    // Killed at the middle step's end, or at the first step's end after that once a pass running
    // beside the steps has pruned: on a loaded engine the first passes, which load the layers the
    // background has not loaded yet, can still be going at the middle (seen once, beside the suite).
    const log = join(fx.dir, 'faults.log');
    const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: `${STEP_END}#${MIDDLE}`, BERTH_FAULT_ARM: 'retention.running:pruned', BERTH_FAULT_LOG: log });
    expect(killed.signal, killed.stderr.slice(-2000)).toBe('SIGKILL');
    const kill = readFileSync(log, 'utf8').split('\n').filter((l) => l.endsWith(` ${STEP_END}`)).length;
    expect(kill, 'a step of the middle or after it, not the last').toBeGreaterThanOrEqual(MIDDLE);
    expect(kill).toBeLessThan(STEPS);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);

    // Killed mid-run: the older snapshots went while it ran; the restore point (the sandbox
    // pointer's snapshot, the newest committed) and the newest ones stayed.
    const parked = await fx.read(async (s) => ({ run: (await s.getRun(runId))!, all: await s.listSnapshots({ runId }), live: await live(s, runId) }));
    expect(parked.run.state).not.toBe('completed');
    expect(parked.all.length, 'the upload and one snapshot per finished step').toBe(kill + 1);
    // A pass every 48 commits of the session (about 16 steps). How far the passes got by the kill
    // depends on the engine's speed, so only that they pruned, and what they must keep, is asserted.
    const pruned = parked.all.filter((x) => x.prunedAt !== null);
    expect(pruned.length, `unpruned: ${parked.live.map((x) => x.checkpoint).join(' ')}`).toBeGreaterThan(0);
    expect(parked.all.slice(-KEEP_LAST).every((x) => x.prunedAt === null), 'the newest keepLast stay').toBe(true);
    const newest = parked.all.at(-1)!;
    expect(newest.prunedAt, 'the restore point is never pruned').toBeNull();
    // Each one kept is on the engine, or still a layer in the store the engine had not loaded when
    // the host died. A removal marks the record, then removes the image: the kill can fall between
    // the two for the removals the pass had in flight (at most two at a time), whose tags berth gc
    // removes (test/fault/retention-kill.test.ts); never a live record without its image.
    const layers = new Set(await fx.read(async (s) => (await s.listSnapshotDeltas()).map((x) => x.imageId)));
    const cut: string[] = [];
    for (const x of parked.live) if (!(layers.has(x.imageId) || (await fx.docker.getImage(`berth-snapshot:${x.id}`).inspect().then(() => true, () => false)))) cut.push(x.checkpoint);
    expect(cut, 'live without an image').toEqual([]);
    const stillTagged: string[] = [];
    for (const x of pruned) if (await fx.docker.getImage(`berth-snapshot:${x.id}`).inspect().then(() => true, () => false)) stillTagged.push(x.checkpoint);
    expect(stillTagged.length, `pruned but still tagged: ${stillTagged.join(' ')}`).toBeLessThanOrEqual(2);

    // A fork after the last step the killed run finished: the rest of the steps, from its snapshot.
    const forked = await fx.cli(['fork', runId, '--at', `s${kill - 1}`, '--json']);
    expect(forked.code, forked.stderr.slice(-2000)).toBe(0);
    const fork = lastJson<Summary>(forked);
    expect(fork.run.state).toBe('completed');
    expect(fork.steps.map((s) => s.step)).toEqual(steps.slice(kill).map((s) => s.name));

    // The original resumes from its restore point and completes; no step ran twice.
    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-2000)).toBe(0);
    const done = lastJson<Summary>(resumed);
    expect(done.run.state).toBe('completed');
    expect(done.steps).toHaveLength(STEPS);
    expect(done.steps.every((s) => s.outcome === 'ok')).toBe(true);
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects).toHaveLength(STEPS);
    expect(effects.every((e) => e.status === 'confirmed')).toBe(true);
    // The steps are `safe`: running one again is allowed (a retry after a transient engine error
    // under load, a step in flight at a kill), so one extra attempt is not a fault. Seen once, run
    // alone on a loaded machine: one effect with 2 attempts (not traced: the record was gone with
    // the test's temp dir). A systematic re-run (a resume from an older snapshot) shows as many.
    const again = effects.filter((e) => e.attempts !== 1);
    expect(again.length <= 1 && again.every((e) => e.attempts === 2), `attempts: ${again.map((e) => `${e.id} ${e.attempts}`).join(', ')}`).toBe(true);

    // The same context: the fork's workspace ends where the original's does, and the fork's
    // history starts at the original's checkpoint.
    const [original, forkDigest] = await fx.read(async (s) => [await lastDigest(s, runId), await lastDigest(s, fork.run.id)]);
    expect(forkDigest).toBe(original);
    expect((await fx.read((s) => s.listRunTransitions(fork.run.id)))[0]!.reason).toContain(`forked from run ${runId}`);

    // After the end, retention leaves the newest KEEP_LAST of the session (the fork is its own session).
    expect((await fx.read((s) => live(s, runId))).length).toBe(KEEP_LAST);
    const check = await fx.cli(['check', '--all', '--json']);
    expect(check.code, check.stdout.slice(-2000) + check.stderr.slice(-2000)).toBe(0);
  });
});
