import { afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';
import { sleep, waitFor } from '../support/fleet';
import { manifestStatus, startRegistry, type TestRegistry } from '../support/registry';
import type { Run } from '../../host/model';

type Summary = { run: Run };

let registry: TestRegistry | undefined;
const fixtures: Array<Awaited<ReturnType<typeof planFixture>>> = [];
afterEach(async () => {
  for (const f of fixtures.splice(0)) await f.cleanup();
  await registry?.stop();
  registry = undefined;
}, 120_000);

describe('snapshot pushes survive a registry outage and share one push of an image', { timeout: 300_000 }, () => {
  it('a registry SIGKILLed during a step and started again 20 s later: the sync push waits for it and the run completes with every snapshot pushed', async () => {
    registry = await startRegistry();
    const fx = await planFixture([
      { name: 'one', run: 'sleep 4 && echo one > one.txt' },
      { name: 'two', run: 'echo two > two.txt' },
    ]);
    fixtures.push(fx);
    const env = { BERTH_REGISTRY: registry.address, BERTH_LOG_LEVEL: 'info' };
    const end = fx.cli(['run', fx.plan, '--json'], env);
    // The base image is pushed before step one starts; the registry goes down while step one runs.
    const runId = await waitFor('step one to run', () =>
      fx.read(async (s) => {
        const t = (await s.listTasks({})).find((x) => x.kind === 'plan-step' && x.status === 'running');
        return t?.runId ?? undefined;
      }),
    );
    await sleep(2000);
    await registry.down();
    await sleep(20_000);
    await registry.up();
    const done = await end;
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<Summary>(done).run.state).toBe('completed');
    // The push was tried while the registry was down, and tried again.
    expect(done.stderr).toMatch(/snapshot push failed; trying again/);
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    expect(snaps.map((s) => s.checkpoint)).toEqual(['upload', 'step:0:one', 'step:1:two']);
    for (const s of snaps) {
      expect(s.registryRef).toMatch(/@sha256:[0-9a-f]{64}$/);
      expect(await manifestStatus(registry.address, 'berth-snapshot', s.registryRef!.split('@')[1]!)).toBe(200);
    }
  });

  it('a registry down longer than the push wait: the step waits in retry_wait naming the registry, never fails, and the run completes once the registry is back', async () => {
    registry = await startRegistry();
    const fx = await planFixture([
      { name: 'one', run: 'sleep 3 && echo one > one.txt' },
      { name: 'two', run: 'echo two > two.txt' },
    ]);
    fixtures.push(fx);
    const end = fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address, BERTH_PUSH_WAIT_MS: '2000' });
    const runId = await waitFor('step one to run', () =>
      fx.read(async (s) => (await s.listTasks({})).find((x) => x.kind === 'plan-step' && x.status === 'running')?.runId ?? undefined),
    );
    await registry.down();
    const waiting = await waitFor('the run to wait for the registry', () =>
      fx.read(async (s) => {
        const r = await s.getRun(runId);
        return r?.state === 'retry_wait' ? r : undefined;
      }),
    );
    const reason = (await fx.read((s) => s.listRunTransitions(runId))).at(-1)!.reason;
    expect(reason).toContain(registry.address);
    expect(reason).toMatch(/did not take it within/);
    expect(waiting.state).toBe('retry_wait');
    await sleep(3000);
    await registry.up();
    const done = await end;
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<Summary>(done).run.state).toBe('completed');
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    expect(snaps.map((s) => s.checkpoint)).toEqual(['upload', 'step:0:one', 'step:1:two']);
    for (const s of snaps) expect(s.registryRef).toMatch(/@sha256:[0-9a-f]{64}$/);
    // Step one's command ran once: waiting for the registry did not run it again.
    expect((await fx.read((s) => s.listEffects({ runId }))).map((e) => e.attempts)).toEqual([1, 1]);
  });

  it('three runs started at once push the same base image to an empty registry and all complete', async () => {
    registry = await startRegistry();
    const runs = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const fx = await planFixture([{ name: 'one', run: `echo ${i} > n.txt` }]);
        fixtures.push(fx);
        return fx;
      }),
    );
    const ends = await Promise.all(runs.map((fx) => fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry!.address })));
    for (const end of ends) {
      expect(end.code, end.stderr).toBe(0);
      expect(lastJson<Summary>(end).run.state).toBe('completed');
    }
    const image = (await runs[0]!.docker.getImage('berth/tiny:latest').inspect()).Id;
    expect(await manifestStatus(registry.address, 'berth-base', image.replace(/^sha256:/, ''))).toBe(200);
  });
});
