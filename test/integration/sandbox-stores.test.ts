import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createSandboxHost, type SandboxHost } from '../../host/sandbox';
import { listRuleTags, ruleTag } from '../../host/sandbox/sandbox-network';
import { openSqliteStore } from '../../host/store';
import { systemClock } from '../../host/support/clock';
import { runNode } from '../support/child';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { bundledCli, lastJson, planFixture, removeHostArtifacts } from '../support/plan-fixture';
import { tinySpec } from '../support/sandbox-spec';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const running = (docker: Awaited<ReturnType<typeof requireEngine>>, id: string) =>
  docker
    .getContainer(id)
    .inspect()
    .then(
      (i) => i.State.Running,
      () => false,
    );

describe('two stores on one machine', { timeout: 240_000 }, () => {
  it("berth gc --store b.db leaves a.db's live container, its network and its INPUT rules alone", async () => {
    const docker = await requireEngine();
    const image = await requireTinyImage(docker);
    // Same machine, same host id (the hostname by default), two stores.
    const hostId = `test-stores-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const dir = mkdtempSync(join(tmpdir(), 'berth-stores-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    cleanups.push(() => removeHostArtifacts(docker, hostId));
    const a = openSqliteStore(join(dir, 'a.db'));
    cleanups.push(() => a.close());
    const logger = pino({ level: process.env.BERTH_TEST_LOG ?? 'warn' });
    const hostA: SandboxHost = createSandboxHost({ docker, records: a, clock: systemClock, logger, hostId });
    cleanups.push(() => hostA.close());
    const lease = await hostA.lease({ ...tinySpec(image), network: { mode: 'open', hostOpenings: [] } }, { sessionId: 'sess_a' });
    cleanups.push(() => lease.release());

    // b.db exists (gc never creates a store): a second store of this machine, with no runs of its own.
    await openSqliteStore(join(dir, 'b.db')).close();
    const gc = await runNode(await bundledCli(), ['gc', '--store', join(dir, 'b.db'), '--json'], { BERTH_HOST_ID: hostId });
    expect(gc.code, gc.stderr).toBe(0);
    expect(lastJson<{ removed: unknown[] }>(gc).removed).toEqual([]);
    expect(await running(docker, lease.containerId), "a.db's container is still running").toBe(true);

    // The same through a host of store b in this process, with no grace for young networks.
    const b = openSqliteStore(join(dir, 'b.db'));
    cleanups.push(() => b.close());
    const hostB = createSandboxHost({ docker, records: b, clock: systemClock, logger, hostId });
    cleanups.push(() => hostB.close());
    expect(await hostB.sweep({ egressMinAgeMs: 0 })).toEqual([]);
    expect(await running(docker, lease.containerId)).toBe(true);
    const nets = await docker.listNetworks({ filters: { name: [`berth-net-${lease.id}`] } });
    expect(nets.map((n) => n.Name), "a.db's network is still there").toEqual([`berth-net-${lease.id}`]);
    expect(await listRuleTags(), "a.db's INPUT rules are still there").toContain(ruleTag(hostId, lease.id));
    // And a.db's own sweep still keeps its live lease.
    expect(await hostA.sweep({ egressMinAgeMs: 0 })).toEqual([]);
    expect((await lease.exec('true')).exitCode).toBe(0);
  });
});

describe('a container killed from outside', { timeout: 240_000 }, () => {
  it('records a step whose container was killed mid-step as lost (needs reconciliation), not as a confirmed run with exit 137', async () => {
    const fx = await planFixture([{ name: 'deploy', run: 'touch started && sleep 60', replay: 'never' }]);
    cleanups.push(() => fx.cleanup());
    const ended = fx.cli(['run', fx.plan, '--json']);
    // Wait until the step itself runs in the sandbox, then kill the container as an outsider would.
    let killed = false;
    for (let i = 0; i < 600 && !killed; i += 1) {
      for (const c of await fx.docker.listContainers({ filters: { label: [`berth.host=${fx.hostId}`] } })) {
        const top = await fx.docker.getContainer(c.Id).top().catch(() => ({ Processes: [] as string[][] }));
        if ((top.Processes ?? []).some((p: string[]) => p.join(' ').includes('sleep 60'))) {
          await fx.docker.getContainer(c.Id).kill();
          killed = true;
        }
      }
      if (!killed) await new Promise((r) => setTimeout(r, 200));
    }
    expect(killed, 'the step started').toBe(true);
    const end = await ended;
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects).toHaveLength(1);
    expect(effects[0]!.status, JSON.stringify(effects[0])).not.toBe('confirmed');
    expect(['executing', 'unknown']).toContain(effects[0]!.status);
    expect(end.code, end.stderr.slice(-2000)).toBe(3);
    expect(lastJson<{ run: { state: string } }>(end).run.state).toBe('needs_reconciliation');
  });
});
