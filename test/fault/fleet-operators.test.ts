import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';
import { keepReleasing, runSettled, startCli, startWorker, stepRunning, stopWorker, submitDetached, waitFor, type WorkerProcess } from '../support/fleet';
import { startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';
import { pushImage } from '../../host/sandbox/registry';

const TTL_MS = 3000;

/**
 * A step held open until the test lets it go (a file outside the workspace, which a restore
 * verifies): it runs as long as the test needs however slow the machine, and the copy a takeover
 * runs again ends once the test sees it, where a sleep long enough for the first was sat out again.
 */
const HELD = 'while [ ! -e /tmp/release ]; do sleep 0.2; done; echo done >> steps.log';

/** Waits for the run to settle, releasing held steps in its sandboxes but those in `except`. */
async function settledReleasing(f: NonNullable<typeof fx>, run: { id: string; sessionId: string }, except: string[] = []) {
  const settled = runSettled(f, run.id);
  await keepReleasing(f, run.sessionId, settled, '/tmp/release', except);
  return settled;
}

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let workers: WorkerProcess[] = [];
let registry: TestRegistry | undefined;
let engineB: SecondEngine | undefined;
afterEach(async () => {
  for (const w of workers) await stopWorker(w, 30_000);
  workers = [];
  await fx?.cleanup();
  fx = undefined;
}, 120_000);
afterAll(async () => {
  await engineB?.stop();
  await registry?.stop();
}, 120_000);

type Listed = { hosts: Array<{ id: string; pid: number; state: string; slotsInUse: number; owns: Array<{ runId: string }>; leaves: Array<{ runId: string | null; why: string }>; drainRequestedAt: number | null; stoppedAt: number | null }> };
const workersOf = async (f: NonNullable<typeof fx>) => {
  const end = await f.cli(['workers', '--json']);
  expect(end.code, end.stderr).toBe(0);
  return lastJson<Listed>(end).hosts;
};

describe('operators see and steer the fleet; workers claim only what they can start', { timeout: 400_000 }, () => {
  it('berth workers shows a live worker with its slot in use and its run, and the same worker SIGKILLed as dead, never running', async () => {
    fx = await planFixture([{ name: 'long', run: HELD }]);
    const run = await submitDetached(fx);
    const w = await startWorker(fx, TTL_MS);
    workers = [w];
    await waitFor('the step to run', () => stepRunning(fx!, run.id, 0));
    await waitFor('the worker to report its slot', async () => ((await workersOf(fx!)).find((h) => h.pid === w.pid)?.slotsInUse === 1 ? true : undefined));
    expect((await workersOf(fx)).find((h) => h.pid === w.pid)).toMatchObject({ state: 'live', slotsInUse: 1, owns: [{ runId: run.id }] });
    const [dead] = await fx.read((s) => s.listLeases({ runId: run.id, unreleased: true }));
    w.child.kill('SIGKILL');
    await w.exited;
    expect((await workersOf(fx)).find((h) => h.pid === w.pid)).toMatchObject({ state: 'dead', slotsInUse: 0 });
    // Another worker finishes the run (and its sandbox with it).
    const next = await startWorker(fx, TTL_MS);
    workers.push(next);
    expect((await settledReleasing(fx, run, [dead!.containerId])).state, next.stderr()).toBe('completed');
  });

  it('berth drain WORKER from another process is recorded and honoured: the worker drains, releases its run and stops; another worker finishes the run', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'two', run: 'sleep 3 && echo two >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const run = await submitDetached(fx);
    const w = await startWorker(fx, 600_000);
    workers = [w];
    await waitFor('step two to run', () => stepRunning(fx!, run.id, 1));
    const id = (await workersOf(fx)).find((h) => h.pid === w.pid)!.id;
    const asked = await fx.cli(['drain', id, '--json']);
    expect(asked.code, asked.stderr).toBe(0);
    expect(lastJson<{ asked: string[] }>(asked).asked).toEqual([id]);
    expect(await w.exited).toBe(0);
    expect(w.stderr()).toContain('drained; leases released');
    const me = (await workersOf(fx)).find((h) => h.id === id)!;
    expect(me.state).toBe('stopped');
    expect(me.drainRequestedAt).not.toBeNull();
    expect((await fx.read((s) => s.getSessionOwner(run.sessionId)))!.stoppedAt).not.toBeNull();
    // Nothing of that worker is left to drain.
    expect((await fx.cli(['drain', id])).code).not.toBe(0);
    const next = await startWorker(fx, 600_000);
    workers.push(next);
    expect((await runSettled(fx, run.id)).state, next.stderr()).toBe('completed');
  });

  it('a take-over does not wait for a busy slot: a worker at its --concurrency takes over a dead worker\'s run with one slot more, while its own run goes on', async () => {
    // Held: run two is still running at the take-over however slow the machine (a sleep was a bet).
    fx = await planFixture([{ name: 'long', run: HELD }]);
    const first = await submitDetached(fx);
    const a = await startWorker(fx, TTL_MS, ['--concurrency', '1']);
    workers = [a];
    await waitFor('run one to run on worker A', () => stepRunning(fx!, first.id, 0));
    const second = await submitDetached(fx);
    const b = await startWorker(fx, TTL_MS, ['--concurrency', '1']);
    workers.push(b);
    await waitFor('run two to run on worker B', () => stepRunning(fx!, second.id, 0));
    expect((await fx.read((s) => s.getSessionOwner(second.sessionId)))!.pid).toBe(b.pid);
    const [deadA] = await fx.read((s) => s.listLeases({ runId: first.id, unreleased: true }));
    a.child.kill('SIGKILL');
    await a.exited;
    // B owns both runs at once: run one was taken over while run two still ran.
    await waitFor('worker B to take run one over', () =>
      fx!.read(async (s) => ((await s.getSessionOwner(first.sessionId))?.pid === b.pid ? true : undefined)),
    );
    expect((await fx.read((s) => s.getRun(second.id)))!.state).toBe('running');
    expect((await fx.read((s) => s.getSessionOwner(second.sessionId)))!.pid).toBe(b.pid);
    const both = Promise.all([settledReleasing(fx, first, [deadA!.containerId]), settledReleasing(fx, second)]);
    const [one, two] = await both;
    expect(one.state).toBe('completed');
    expect(two.state).toBe('completed');
  });

  it('a worker on an engine with no images and an empty registry claims nothing it cannot start, says why in berth workers, and starts the run once the base image is pushed', async () => {
    registry = await startRegistry();
    engineB = await startSecondEngine('b');
    fx = await planFixture([{ name: 'one', run: 'echo one >> steps.log' }]);
    const run = await submitDetached(fx);
    const onB = await startCli(fx, ['worker', '--grace', '5'], { BERTH_LEASE_TTL_MS: String(TTL_MS), BERTH_REGISTRY: registry.address, DOCKER_HOST: engineB.dockerHost, BERTH_HOST_ID: `${fx.hostId}-b` });
    workers = [onB];
    const leaves = await waitFor('worker B to say why it leaves the run', async () => {
      const h = (await workersOf(fx!)).find((x) => x.pid === onB.pid);
      return h && h.leaves.length > 0 ? h.leaves : undefined;
    });
    expect(leaves[0]!.runId).toBe(run.id);
    expect(leaves[0]!.why).toMatch(/is not on this engine and registry .* does not have it/);
    expect((await fx.read((s) => s.getRun(run.id)))!.state).toBe('admitted');
    expect(await fx.read((s) => s.getSessionOwner(run.sessionId))).toBeUndefined();

    const tiny = (await fx.docker.getImage('berth/tiny:latest').inspect()).Id;
    await pushImage(fx.docker, tiny, `${registry.address}/berth-base`, tiny.replace(/^sha256:/, ''));
    const end = await runSettled(fx, run.id);
    expect(end.state, onB.stderr()).toBe('completed');
    expect((await fx.read((s) => s.getSessionOwner(run.sessionId)))!.holder).toBe(`${fx.hostId}-b`);
  });
});
