import { appendFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';
import { runSettled, startCli, stopWorker, waitFor, type WorkerProcess } from '../support/fleet';
import { startRegistry, type TestRegistry } from '../support/registry';

// A worker gets exactly what `berth run` gets (issue 26, issue 28 items 1 and 5): the registry
// transport for snapshots, the artifact store, and retention at the end of every run it drives.

let registry: TestRegistry;
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let worker: WorkerProcess | undefined;
beforeAll(async () => {
  registry = await startRegistry();
}, 60_000);
afterAll(async () => {
  await registry?.stop();
});
afterEach(async () => {
  if (worker) await stopWorker(worker, 60_000);
  worker = undefined;
  await fx?.cleanup();
  fx = undefined;
});

const catalog = async (): Promise<string[]> => ((await (await fetch(`http://${registry.address}/v2/_catalog`)).json()) as { repositories: string[] }).repositories ?? [];

describe('berth worker drives runs with the same runtime as berth run', { timeout: 300_000 }, () => {
  it('a worker with BERTH_REGISTRY pushes the run\'s snapshots, keeps its step artifacts and prunes its snapshots to keepLast at the run\'s end', async () => {
    fx = await planFixture([
      { name: 'build', run: 'mkdir -p out && echo built > out/app.txt', artifacts: ['out/**'] },
      { name: 'two', run: 'echo two >> log.txt' },
      { name: 'three', run: 'echo three >> log.txt' },
      { name: 'four', run: 'echo four >> log.txt' },
    ]);
    appendFileSync(`${fx.dir}/env.yaml`, 'snapshot: { keepLast: 1, push: sync }\n');
    const submitted = await fx.cli(['run', fx.plan, '--detach', '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(submitted).run.id;
    expect(await catalog()).toEqual([]);

    worker = await startCli(fx, ['worker', '--grace', '5'], { BERTH_LEASE_TTL_MS: '5000', BERTH_REGISTRY: registry.address });
    const end = await runSettled(fx, runId);
    expect(end.state, worker.stderr()).toBe('completed');

    // Snapshots travelled: the registry holds the run's repository and the kept snapshot names its pushed manifest.
    expect((await catalog()).length, worker.stderr()).toBeGreaterThan(0);
    // Retention at the run's end, as berth run applies it: only the newest snapshot is left unpruned.
    const kept = await waitFor('the worker to prune the run\'s snapshots to keepLast 1', () =>
      fx!.read(async (s) => {
        const snaps = await s.listSnapshots({ runId });
        const unpruned = snaps.filter((x) => x.prunedAt === null);
        return snaps.length >= 4 && unpruned.length === 1 ? unpruned : undefined;
      }), 120_000);
    expect(kept[0]!.registryRef, 'the kept snapshot was pushed').toMatch(new RegExp(`^${registry.address.replace(/\./g, '\\.')}/`));
    // The worker's log says the run ended, not only that its session was claimed (before: nothing after the claim).
    await waitFor('the worker to report the run\'s end', async () => (worker!.stderr().includes(`run ${runId} (plan) completed; released session ${end.sessionId}`) ? true : undefined), 60_000);

    // The step's artifact was copied out under the worker and is there, intact.
    const listed = await fx.cli(['artifacts', runId, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const artifacts = lastJson<{ artifacts: Array<{ path: string; status: string; step: string }> }>(listed).artifacts;
    expect(artifacts.map((a) => [a.path, a.step, a.status])).toEqual([['out/app.txt', 'build', 'present']]);
  });
});
