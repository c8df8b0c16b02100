import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { sleep, startCli, stepRunning, waitFor, type WorkerProcess } from '../support/fleet';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let host: WorkerProcess | undefined;
afterEach(async () => {
  if (host) {
    host.child.kill('SIGCONT');
    host.child.kill('SIGKILL');
    await host.exited;
  }
  host = undefined;
  await fx?.cleanup();
  fx = undefined;
}, 120_000);

/** The run's sandbox containers on the main engine (running or not). */
async function sandboxes(f: NonNullable<typeof fx>, sessionId: string) {
  return f.docker.listContainers({ all: true, filters: { label: [`berth.session=${sessionId}`] } });
}

describe('a sandbox whose lease is not renewed stops its own commands', { timeout: 300_000 }, () => {
  it('a host SIGSTOPped inside a step: its sandbox keeps running while the host renews it, and stops by itself once the lease went unrenewed for its TTL', async () => {
    fx = await planFixture([{ name: 'long', run: 'sleep 600' }]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(envFile, readFileSync(envFile, 'utf8').replace('lease: { ttlS: 600, heartbeatS: 10 }', 'lease: { ttlS: 4, heartbeatS: 1 }'));
    host = await startCli(fx, ['run', fx.plan]);
    const runId = await waitFor('the run to exist', () => fx!.read(async (s) => (await s.listRuns())[0]?.id));
    await waitFor('the step to run', () => stepRunning(fx!, runId, 0));
    const sessionId = (await fx.read((s) => s.getRun(runId)))!.sessionId;
    // Renewed by a live host: still running after three TTLs.
    await sleep(12_000);
    const live = await sandboxes(fx, sessionId);
    expect(live.map((c) => c.State)).toEqual(['running']);
    const id = live[0]!.Id;
    const top = (await fx.docker.getContainer(id).top({ ps_args: '-eo pid,args' })) as { Processes: string[][] };
    expect(top.Processes.some((p) => p.join(' ').includes('sleep 600'))).toBe(true);

    host.child.kill('SIGSTOP');
    const stopped = await waitFor('the sandbox to stop by itself', async () => {
      const info = await fx!.docker.getContainer(id).inspect();
      return info.State.Running ? undefined : info;
    }, 120_000, 500);
    expect(stopped.State.Running).toBe(false);
    const logs = (await fx.docker.getContainer(id).logs({ stdout: true, stderr: true })).toString();
    expect(logs).toContain('the lease was not renewed');
    fx.allowLeftovers('the frozen host is killed, leaving its stopped sandbox to the next sweep');
  });
});
