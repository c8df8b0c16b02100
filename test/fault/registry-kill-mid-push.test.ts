import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { finishedStepCounts, runSettled, sleep, startCli, stopWorker, submitDetached, waitFor, type WorkerProcess } from '../support/fleet';
import { planFixture } from '../support/plan-fixture';
import { manifestStatus, startRegistry, type TestRegistry } from '../support/registry';
import { sharedPostgres, stopSharedPostgres } from '../support/store-kinds';

// Issue 28, "Show it works": the registry SIGKILLed while a sync push is on the wire (an upload
// of the snapshot's layer open in the registry's storage), under a worker on PostgreSQL, and
// started again 20 s later: the checkpoint waits for the push (the engine retries a cut-off layer
// upload itself; past that, the transport's backoff), and the run completes, every snapshot
// pushed, every step once.

let registry: TestRegistry | undefined;
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let worker: WorkerProcess | undefined;
afterEach(async () => {
  if (worker) await stopWorker(worker, 60_000);
  worker = undefined;
  await fx?.cleanup();
  fx = undefined;
  await registry?.stop();
  registry = undefined;
}, 120_000);
afterAll(() => stopSharedPostgres(), 60_000);

/** Whether an upload to the snapshot repository is on the wire: an open upload that has taken over 1 MB so far. */
function uploadOpen(storage: string): boolean {
  const dir = join(storage, 'docker', 'registry', 'v2', 'repositories', 'berth-snapshot', '_uploads');
  try {
    // Upload sessions opened ahead hold no data yet; only one being written counts.
    return readdirSync(dir).some((u) => {
      try {
        return statSync(join(dir, u, 'data')).size > 1 << 20;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

describe('a registry killed in the middle of a sync push', { timeout: 600_000 }, () => {
  it('a registry SIGKILLed while a sync push is uploading, under a worker on PostgreSQL, and started again 20 s later: the checkpoint waits for the push, the run completes with every snapshot pushed and each step once', async () => {
    registry = await startRegistry();
    const store = await (await sharedPostgres()).createStoreDatabase('killmidpush');
    // 60 MB of random bytes: a layer big enough that its upload is on the wire for a while.
    fx = await planFixture(
      [
        { name: 'big', run: 'head -c 62914560 /dev/urandom > big.bin && echo big >> steps.log' },
        { name: 'after', run: 'echo after >> steps.log' },
      ],
      undefined,
      { store },
    );
    const run = await submitDetached(fx);
    worker = await startCli(fx, ['worker', '--grace', '5'], { BERTH_REGISTRY: registry.address, BERTH_LOG_LEVEL: 'info', BERTH_LEASE_TTL_MS: '10000' });
    // The base image goes up first (its own repository); the kill waits for the step's snapshot upload.
    await waitFor('step big to run', () => fx!.read(async (s) => (await s.listTasks({ runId: run.id })).find((t) => t.kind === 'plan-step' && t.status === 'running')));
    await waitFor('an upload of the snapshot to be open', async () => (uploadOpen(registry!.storage) ? true : undefined), 240_000, 20);
    await registry.down();
    // The step's checkpoint waits for the push that was cut off (the engine's own retries or ours).
    const atKill = await fx.read((s) => s.listSnapshots({ runId: run.id }));
    expect(atKill.map((s) => s.checkpoint)).not.toContain('step:0:big');
    await sleep(20_000);
    await registry.up();
    const end = await runSettled(fx, run.id);
    expect(end.state, worker.stderr()).toBe('completed');
    expect(await finishedStepCounts(fx, run.id)).toEqual({ big: 1, after: 1 });
    const snaps = await fx.read((s) => s.listSnapshots({ runId: run.id }));
    expect(snaps.map((s) => s.checkpoint)).toEqual(['upload', 'step:0:big', 'step:1:after']);
    for (const s of snaps) {
      expect(s.registryRef).toMatch(/@sha256:[0-9a-f]{64}$/);
      expect(await manifestStatus(registry.address, 'berth-snapshot', s.registryRef!.split('@')[1]!)).toBe(200);
    }
  });
});
