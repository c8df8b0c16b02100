import { afterEach, describe, expect, it } from 'vitest';
import { createSandboxHost } from '../../host/sandbox';
import { systemClock } from '../../host/support';
import { lastJson, planFixture } from '../support/plan-fixture';
import { tinySpec } from '../support/sandbox-spec';
import { quietLogger } from '../support/temp-store';

const STEPS = [
  { name: 'one', run: 'echo one >> steps.log' },
  { name: 'two', run: 'echo two >> steps.log' },
  { name: 'three', run: 'echo three >> steps.log' },
];

type Fixture = Awaited<ReturnType<typeof planFixture>>;
let fx: Fixture | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const containersOf = async (f: Fixture) => (await f.docker.listContainers({ all: true, filters: { label: [`berth.host=${f.hostId}`] } })).map((c) => c.Id);

/**
 * A run killed after its first step, its sandbox removed while the host is down, and a resume
 * killed right after it leased a new sandbox and before anything recorded that lease on the run.
 */
async function leakedByKilledResume() {
  fx = await planFixture(STEPS);
  const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#1' });
  expect(first.signal, first.stderr.slice(-2000)).toBe('SIGKILL');
  const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
  for (const id of await containersOf(fx)) await fx.docker.getContainer(id).remove({ force: true });
  const killed = await fx.cli(['resume', runId, '--json'], { BERTH_FAULT: 'sandbox:leased' });
  expect(killed.signal, killed.stderr.slice(-2000)).toBe('SIGKILL');
  const leaked = await containersOf(fx);
  expect(leaked, 'the killed resume left its sandbox').toHaveLength(1);
  // The run is unfinished and its host may come back: gc leaves its sandbox alone.
  const early = await fx.cli(['gc', '--json']);
  expect(lastJson<{ removed: unknown[] }>(early).removed).toEqual([]);
  expect(await containersOf(fx)).toEqual(leaked);
  // show tells the run's sandbox from the leaked one.
  const shown = lastJson<{ leases: Array<{ id: string; containerId: string; current: boolean; releasedAt: number | null }> }>(await fx.cli(['show', runId, '--json']));
  expect(shown.leases.filter((l) => l.current)).toHaveLength(1);
  expect(shown.leases.find((l) => l.containerId === leaked[0])).toMatchObject({ current: false, releasedAt: null });
  return { fx, runId, leaked: leaked[0]! };
}

describe('leases of a run end with the run', { timeout: 300_000 }, () => {
  it('releases the sandbox a killed resume leased but never recorded when the run completes: no container of the store remains', async () => {
    const { fx, runId } = await leakedByKilledResume();
    const done = await fx.cli(['resume', runId, '--json']);
    expect(done.code, done.stderr.slice(-2000)).toBe(0);
    expect(lastJson<{ run: { state: string } }>(done).run.state).toBe('completed');
    expect(await containersOf(fx)).toEqual([]);
    const leases = await fx.read((s) => s.listLeases({}));
    expect(leases.filter((l) => l.releasedAt === null)).toEqual([]);
    expect(leases.every((l) => l.runId === runId)).toBe(true);
    const shown = lastJson<{ leases: Array<{ current: boolean; releasedAt: number | null }> }>(await fx.cli(['show', runId, '--json']));
    expect(shown.leases.filter((l) => l.current).map((l) => l.releasedAt !== null)).toEqual([true]);
    const gc = await fx.cli(['gc', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    expect(lastJson<{ removed: unknown[] }>(gc).removed).toEqual([]);
  });

  it('removes the sandbox a killed resume left before deciding anything, and berth gc removes a finished run\'s leftover sandbox at once (no TTL wait)', async () => {
    const { fx, runId, leaked } = await leakedByKilledResume();
    // The host dies right after the run's final commit, before it released anything.
    const done = await fx.cli(['resume', runId, '--json'], { BERTH_FAULT: 'after:phase.complete:plan' });
    expect(done.signal, done.stderr.slice(-2000)).toBe('SIGKILL');
    const run = (await fx.read((s) => s.getRun(runId)))!;
    expect(run.state).toBe('completed');
    // The resume, as the run's new owner, removed the sandbox the killed resume had leased (an
    // earlier owner's) before it decided anything (issue 24); the run's own ended with its last step.
    expect(await containersOf(fx)).toEqual([]);
    const sweeps = await fx.read((s) => s.listSweeps({}));
    expect(sweeps.find((w) => w.containerId === leaked)).toMatchObject({ reason: 'stale_epoch' });
    // A host of the run's last epoch that leased one more sandbox for it and died before recording
    // it on the run (the lease record exists first, as every lease's does).
    const stray = await fx.read(async (store) => {
      const owner = (await store.getSessionOwner(run.sessionId))!;
      const host = createSandboxHost({ docker: fx.docker, records: store, clock: systemClock, logger: quietLogger(), hostId: fx.hostId });
      const image = (await store.listLeases({ runId }))[0]!.imageDigest;
      const lease = await host.lease(tinySpec(image), { sessionId: run.sessionId, runId, epoch: owner.epoch, autoHeartbeat: false });
      return lease.containerId;
    });
    expect(await containersOf(fx)).toEqual([stray]);
    const gc = await fx.cli(['gc', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    const removed = lastJson<{ removed: Array<{ containerId: string; reason: string }> }>(gc).removed;
    expect(removed).toEqual([expect.objectContaining({ containerId: stray, reason: 'run_ended' })]);
    expect(await containersOf(fx)).toEqual([]);
    expect((await fx.read((s) => s.listLeases({}))).filter((l) => l.releasedAt === null)).toEqual([]);
  });

  it('releases the sandbox of a failed run like a completed one\'s', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one >> steps.log' }, { name: 'broken', run: 'exit 7' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-2000)).toBe(1);
    expect(lastJson<{ run: { state: string } }>(end).run.state).toBe('failed');
    expect(await containersOf(fx)).toEqual([]);
    expect((await fx.read((s) => s.listLeases({}))).filter((l) => l.releasedAt === null)).toEqual([]);
  });
});
