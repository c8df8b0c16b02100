import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';
import { runSettled, startCli, stepRunning, stopWorker, submitDetached, waitFor, type WorkerProcess } from '../support/fleet';
import { startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';

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

/** What is left on the main engine of one lease: its containers, its networks and its INPUT rules. */
async function leftoversOf(f: NonNullable<typeof fx>, leaseId: string) {
  const containers = await f.docker.listContainers({ all: true, filters: { label: [`berth.lease=${leaseId}`] } });
  const networks = await f.docker.listNetworks({ filters: { label: [`berth.lease=${leaseId}`] } });
  const rules = execFileSync('iptables', ['-S', 'INPUT'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(leaseId));
  return { containers: containers.length, networks: networks.length, rules: rules.length };
}

const none = { containers: 0, networks: 0, rules: 0 };

describe('no sandbox outlives its lease', { timeout: 400_000 }, () => {
  it('a SIGTERM-drained worker removes the sandbox of the run it gives up (container, network, INPUT rules), and another worker finishes the run from its snapshot', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'mid', run: 'sleep 4 && echo mid >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const envFile = `${fx.dir}/env.yaml`;
    // A networked sandbox: its network and INPUT rules must go too.
    writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:9"], allowOverride: ["localhost:9"] }\n`);
    const run = await submitDetached(fx);
    const first = await startCli(fx, ['worker', '--grace', '60'], { BERTH_LEASE_TTL_MS: '600000' });
    workers = [first];
    await waitFor('the middle step to run', () => stepRunning(fx!, run.id, 1));
    const [lease] = await fx.read((s) => s.listLeases({ runId: run.id, unreleased: true }));
    expect(await leftoversOf(fx, lease!.id)).toMatchObject({ containers: 1, networks: 1 });
    expect((await leftoversOf(fx, lease!.id)).rules).toBeGreaterThan(0);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(await leftoversOf(fx, lease!.id)).toEqual(none);
    expect((await fx.read((s) => s.getLease(lease!.id)))!.releasedAt).not.toBeNull();

    const second = await startCli(fx, ['worker', '--grace', '5'], { BERTH_LEASE_TTL_MS: '600000' });
    workers.push(second);
    const end = await runSettled(fx, run.id);
    expect(end.state, second.stderr()).toBe('completed');
    // The completing commit does not wait for the sandbox's removal: the release it starts removes
    // it in the background, while the worker lives on. Nothing may stay behind once it is done.
    const leases = await fx.read((s) => s.listLeases({ runId: run.id }));
    await waitFor('every sandbox of the run to be removed', async () => ((await Promise.all(leases.map((l) => leftoversOf(fx!, l.id)))).every((x) => x.containers + x.networks + x.rules === 0) ? true : undefined), 120_000);
    for (const l of leases) expect(await leftoversOf(fx, l.id)).toEqual(none);
  });

  it('a run taken over on another engine leaves the dead owner\'s sandbox released but running on its engine; a host of another id starting on that engine removes it', async () => {
    registry = await startRegistry();
    engineB = await startSecondEngine('b');
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'two', run: 'sleep 6 && echo two >> steps.log' },
    ]);
    const ttl = { BERTH_LEASE_TTL_MS: '3000', BERTH_REGISTRY: registry.address };
    const run = await submitDetached(fx);
    const a = await startCli(fx, ['worker', '--grace', '5'], ttl);
    workers = [a];
    await waitFor('step two to run on engine A', () => stepRunning(fx!, run.id, 1));
    const [lease] = await fx.read((s) => s.listLeases({ runId: run.id, unreleased: true }));
    a.child.kill('SIGKILL');
    await a.exited;

    // B runs on its own engine: it restores the run from the registry and cannot reach A's sandbox.
    const b = await startCli(fx, ['worker', '--grace', '5'], { ...ttl, DOCKER_HOST: engineB.dockerHost, BERTH_HOST_ID: `${fx.hostId}-b` });
    workers.push(b);
    const end = await runSettled(fx, run.id);
    expect(end.state, b.stderr()).toBe('completed');
    expect((await fx.read((s) => s.getLease(lease!.id)))!.releasedAt).not.toBeNull();
    expect((await leftoversOf(fx, lease!.id)).containers).toBe(1);
    // berth show on engine A tells the released lease whose container still runs from one that is gone.
    const shown = async () => lastJson<{ leases: Array<{ id: string; releasedAt: number | null; container: string }> }>(await fx!.cli(['show', run.id, '--json'])).leases.find((l) => l.id === lease!.id)!;
    expect(await shown()).toMatchObject({ container: 'running' });
    expect((await shown()).releasedAt).not.toBeNull();

    // Any host on engine A, whatever its id, removes a container whose lease is released.
    const c = await startCli(fx, ['worker', '--grace', '5'], { ...ttl, BERTH_HOST_ID: `${fx.hostId}-c` });
    workers.push(c);
    await waitFor('the released sandbox to be swept', async () => ((await leftoversOf(fx!, lease!.id)).containers === 0 ? true : undefined), 60_000, 500);
    const sweeps = await fx.read((s) => s.listSweeps({}));
    expect(sweeps.some((w) => w.leaseId === lease!.id && w.reason === 'released')).toBe(true);
    expect(await shown()).toMatchObject({ container: 'absent' });
  });
});
