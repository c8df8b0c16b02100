import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { planFixture, type PlanStepDef } from '../support/plan-fixture';
import { finishedStepCounts, runDigest, runSettled, sleep, startCli, stopWorker, submitDetached, type WorkerProcess } from '../support/fleet';
import { startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';
import { sharedPostgres, stopSharedPostgres } from '../support/store-kinds';

// Issue 28's load test in CI size: a PostgreSQL store, a registry, three workers (two on the main
// engine, one on a second engine that starts with no images), runs submitted with --detach, a
// random worker SIGKILLed every few seconds (and started again on its engine). Nothing is lost
// or stuck, no step runs twice, every run ends with its uninterrupted twin's workspace. The
// issue's size: FLEET28_RUNS=48 FLEET28_STEPS=6 FLEET28_KILLS=12 FLEET28_KILL_EVERY_S=20
// (a manual run: it takes a long while on 2 cores).
const RUNS = Number(process.env.FLEET28_RUNS ?? 6);
const STEPS_N = Number(process.env.FLEET28_STEPS ?? 3);
const KILLS = Number(process.env.FLEET28_KILLS ?? 3);
const KILL_EVERY_S = Number(process.env.FLEET28_KILL_EVERY_S ?? 4);
const TTL_MS = 3000;

const STEPS: PlanStepDef[] = Array.from({ length: STEPS_N }, (_, i) => ({ name: `s${i + 1}`, run: `sleep 0.${(i % 3) + 4} && echo s${i + 1} >> steps.log && head -c 2000 /dev/zero > f${i + 1}` }));

let registry: TestRegistry;
let engineB: SecondEngine;
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let workers: WorkerProcess[] = [];
beforeAll(async () => {
  registry = await startRegistry();
  engineB = await startSecondEngine('l');
}, 120_000);
afterAll(async () => {
  await engineB?.stop();
  await registry?.stop();
  await stopSharedPostgres();
}, 120_000);
afterEach(async () => {
  for (const w of workers) if (w) await stopWorker(w, 60_000);
  workers = [];
  await fx?.cleanup();
  fx = undefined;
}, 300_000);

describe('a fleet on two engines under load with random SIGKILLs', { timeout: 3_600_000 }, () => {
  it(`${RUNS} runs x ${STEPS_N} steps under 3 workers on 2 engines (PostgreSQL, a registry) with ${KILLS} random SIGKILLs: 0 runs lost or stuck, 0 steps run twice, every run equal to its uninterrupted twin`, async () => {
    const store = await (await sharedPostgres()).createStoreDatabase('fleetload28');
    fx = await planFixture(STEPS, undefined, { store });
    fx.allowLeftovers('a SIGKILLed worker may leave snapshot images whose records never committed; berth gc removes them after the grace period', unrecordedSnapshotImages);
    // The twin runs with the registry, so the base is there before any worker starts: engine B
    // can start a run from the first moment, and the test makes sure it does (below).
    const twin = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address });
    expect(twin.code, twin.stderr).toBe(0);
    const twinId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const expected = (await runDigest(fx, twinId))!;

    const runs: Run[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await submitDetached(fx));
    const common = { BERTH_LEASE_TTL_MS: String(TTL_MS), BERTH_REGISTRY: registry.address, BERTH_ARTIFACT_DIR: `${fx.dir}/artifacts` };
    // Worker 2 is another machine: its own host id and engine B.
    const envs = [common, common, { ...common, DOCKER_HOST: engineB.dockerHost, BERTH_HOST_ID: `${fx.hostId}-b` }];
    const start = (i: number) => startCli(fx!, ['worker', '--grace', '5'], envs[i]!);
    // Engine B's worker starts alone, so it owns a run and has made its snapshot images whatever
    // the machine's speed; the first kill is of B while it owns a run with those images (a quiet
    // machine could otherwise finish every run before B claims one, or before any random kill).
    workers = [undefined as unknown as WorkerProcess, undefined as unknown as WorkerProcess, await start(2)];
    const ownedByB = () =>
      fx!.read(async (s) => {
        for (const r of runs) {
          const run = (await s.getRun(r.id))!;
          if (['completed', 'failed', 'cancelled'].includes(run.state)) continue;
          if ((await s.getSessionOwner(run.sessionId))?.pid === workers[2]!.pid) return true;
        }
        return false;
      });
    const imagesOnB = async () => (await engineB.docker.listImages({ filters: { label: ['berth.snapshot'] } })).length;
    // Only B runs, and six runs wait: while it works, B always owns an unfinished run.
    let bReady = false;
    for (let tries = 0; tries < 600 && !(bReady = (await imagesOnB()) > 0 && (await ownedByB())); tries++) await sleep(200);
    expect(bReady, `engine B's worker owned no run with a snapshot image on its engine in 120 s: ${workers[2]!.stderr().slice(-2000)}`).toBe(true);
    let kills = 1;
    workers[2]!.child.kill('SIGKILL');
    await workers[2]!.exited;
    const stderrs: string[] = [workers[2]!.stderr()];
    workers[2] = await start(2);
    workers[0] = await start(0);
    workers[1] = await start(1);
    let seed = Number(process.env.FLEET28_SEED ?? Date.now() % 100_000);
    console.log(`fleet load (issue 28): seed ${seed}`);
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    // Each kill takes a worker that owns a run at that moment (chosen at random among them): a
    // kill of an idle worker would test nothing.
    const owning = () =>
      fx!.read(async (s) => {
        const pids = new Set<number>();
        for (const r of runs) {
          const run = await s.getRun(r.id);
          const owner = run && !['completed', 'failed', 'cancelled'].includes(run.state) ? await s.getSessionOwner(run.sessionId) : undefined;
          if (owner?.pid) pids.add(owner.pid);
        }
        return workers.map((w, i) => (pids.has(w.pid) ? i : -1)).filter((i) => i >= 0);
      });
    for (let k = 1; k < KILLS; k++) {
      await sleep((KILL_EVERY_S + random() * KILL_EVERY_S) * 1000);
      let candidates: number[] = [];
      for (let tries = 0; tries < 100 && (candidates = await owning()).length === 0; tries++) await sleep(200);
      if (candidates.length === 0) break;
      const i = candidates[Math.floor(random() * candidates.length)]!;
      kills++;
      workers[i]!.child.kill('SIGKILL');
      await workers[i]!.exited;
      stderrs.push(workers[i]!.stderr());
      workers[i] = await start(i);
    }
    const ends = [];
    for (const r of runs) ends.push(await runSettled(fx, r.id, 3_000_000));
    const lost = ends.filter((e) => e.state !== 'completed');
    let duplicated = 0;
    let differing = 0;
    for (const r of runs) {
      const counts = await finishedStepCounts(fx, r.id);
      duplicated += Object.values(counts).reduce((n, c) => n + Math.max(0, c - 1), 0);
      if ((await runDigest(fx, r.id)) !== expected) differing++;
    }
    const logs = stderrs.concat(workers.map((w) => w.stderr())).join('');
    const takeovers = logs.match(/taken from/g)?.length ?? 0;
    console.log(`fleet load (issue 28): ${RUNS} runs x ${STEPS_N} steps, ${kills} kills of owners, ${takeovers} take-overs in the logs: lost ${lost.length}, duplicated steps ${duplicated}, differing from twin ${differing}`);
    expect(lost.map((e) => `${e.id}:${e.state}`)).toEqual([]);
    // Every kill was of a worker owning a run, which some worker then took over.
    expect(kills).toBeGreaterThan(0);
    expect(takeovers).toBeGreaterThanOrEqual(kills);
    expect(duplicated).toBe(0);
    expect(differing).toBe(0);
    for (const r of runs) expect(await finishedStepCounts(fx, r.id)).toEqual(Object.fromEntries(STEPS.map((s) => [s.name, 1])));
    // Retention ran where each run ended: a run that moved to engine B left the images of its
    // early snapshots on engine A, pruned there by B. A gc on engine A removes them (the leak check
    // then finds none; at the issue's size 11 were left before gc removed pruned records' images).
    const gc = await fx.cli(['gc', '--json'], common);
    expect(gc.code, gc.stderr).toBe(0);
  });
});
