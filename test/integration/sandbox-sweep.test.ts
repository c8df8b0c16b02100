import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { containerCreateOptions, containerLabels, createSandboxHost, createWarmPool, LABEL, type LeaseRecord } from '../../host/sandbox';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test } from '../support/sandbox-fixture';

const exists = (docker: { getContainer(id: string): { inspect(): Promise<unknown> } }, id: string) =>
  docker
    .getContainer(id)
    .inspect()
    .then(
      () => true,
      () => false,
    );

describe('sandbox sweeper', () => {
  test('the sweeper removes the container of a host process killed with SIGKILL once its lease expired, and records it', async ({ sandbox }) => {
    const child = spawn('npx', ['tsx', 'test/support/sandbox-crash-child.ts', sandbox.storePath, sandbox.hostId, sandbox.imageId, '4'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (c) => reject(new Error(`child exited early with ${c}`)));
    });
    const record = JSON.parse(line) as LeaseRecord;
    // The whole tree (npx, tsx, node) dies at once, with no chance to clean up.
    process.kill(-child.pid!, 'SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(await exists(sandbox.docker, record.containerId)).toBe(true);

    // Still leased: a sweep leaves it alone.
    expect(await sandbox.host.sweep()).toEqual([]);
    await new Promise((r) => setTimeout(r, Math.max(0, record.expiresAt - Date.now()) + 50));
    const swept = await sandbox.host.sweep();
    expect(swept).toEqual([expect.objectContaining({ containerId: record.containerId, leaseId: record.id, reason: 'expired', hostId: sandbox.hostId })]);
    expect(await exists(sandbox.docker, record.containerId)).toBe(false);
    expect(await sandbox.store.listSweeps({ hostId: sandbox.hostId })).toEqual([expect.objectContaining({ containerId: record.containerId, reason: 'expired' })]);
  }, 90_000);

  test('the sweeper removes released and unknown containers and keeps active leases', async ({ sandbox }) => {
    const spec = sandbox.spec();
    const active = await sandbox.host.lease(spec, { sessionId: 's' });
    const released = await sandbox.host.lease(spec, { sessionId: 's' });
    // Released in the store but the process died before removing the container.
    await sandbox.store.releaseLease(released.id, Date.now());
    // A container whose lease record was never written (died between create and insert).
    const storeId = await sandbox.store.storeId();
    const labels = containerLabels({ hostId: sandbox.hostId, storeId, instanceId: 'inst_dead', envFingerprint: spec.envFingerprint, createdAt: Date.now(), sessionId: 's', leaseId: 'lease_never' });
    const orphan = await sandbox.docker.createContainer(containerCreateOptions(spec, labels));
    // Another host's container is none of this sweeper's business.
    const otherLabels = containerLabels({ hostId: `${sandbox.hostId}-other`, storeId, instanceId: 'x', envFingerprint: spec.envFingerprint, createdAt: Date.now() });
    const other = await sandbox.docker.createContainer(containerCreateOptions(spec, { ...otherLabels, [LABEL.host]: `${sandbox.hostId}` + '-other' }));
    try {
      const swept = await sandbox.host.sweep();
      expect(swept.map((s) => [s.containerId, s.reason]).sort()).toEqual(
        [
          [released.containerId, 'released'],
          [orphan.id, 'unknown'],
        ].sort(),
      );
      expect(swept.find((s) => s.containerId === orphan.id)!.leaseId).toBe('lease_never');
      expect(await exists(sandbox.docker, active.containerId)).toBe(true);
      expect(await exists(sandbox.docker, other.id)).toBe(true);
      expect((await sandbox.host.verify(active.record)).ok).toBe(true);
    } finally {
      await other.remove({ force: true });
      await active.release();
    }
  });

  test('a sweep reads the lease records of what is on the engine, not every lease its host ever had: 300 released leases of earlier runs cost it no read', async ({ sandbox }) => {
    // A worker sweeps at every run end: reading each lease its host id ever recorded made every
    // sweep longer than the last, for as long as the host id lives (across restarts too).
    let rows = 0;
    const counted = new Proxy(sandbox.store, {
      get(target, key, recv) {
        const v = Reflect.get(target, key, recv) as unknown;
        if (typeof v !== 'function') return v;
        return async (...args: unknown[]) => {
          const out = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if ((key === 'listLeases' || key === 'getLease') && out) rows += Array.isArray(out) ? out.length : 1;
          return out;
        };
      },
    });
    const host = createSandboxHost({ docker: sandbox.docker, records: counted, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId });
    const spec = sandbox.spec();
    const live = await host.lease(spec, { sessionId: 's' });
    try {
      const at = Date.now();
      for (let i = 0; i < 300; i++) {
        await sandbox.store.insertLease({ id: `lease_old${i}`, sessionId: `s${i}`, hostId: sandbox.hostId, containerId: `gone${i}`, imageDigest: sandbox.imageId, envFingerprint: spec.envFingerprint, createdAt: at, expiresAt: at + 60_000, releasedAt: null, runId: null });
        await sandbox.store.releaseLease(`lease_old${i}`, at);
      }
      rows = 0;
      expect(await host.sweep()).toEqual([]);
      // The live lease's container (and its network, when it has one): its record, read once or twice.
      expect(rows).toBeLessThanOrEqual(4);
      expect(await exists(sandbox.docker, live.containerId)).toBe(true);
    } finally {
      await live.release();
    }
  });

  test('a sweep honours its abort signal', async ({ sandbox }) => {
    sandbox.allowLeftovers('plants a dead host\'s container by hand and aborts the sweep before it runs, so that container stays on purpose', (l) => l.kind === 'container' && l.labels['berth.instance'] === 'inst_dead');
    const spec = sandbox.spec();
    const labels = containerLabels({ hostId: sandbox.hostId, storeId: await sandbox.store.storeId(), instanceId: 'inst_dead', envFingerprint: spec.envFingerprint, createdAt: Date.now() });
    await sandbox.docker.createContainer(containerCreateOptions(spec, labels));
    const err = await sandbox.host.sweep({ signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect((err as Error).name).toBe('AbortError');
  });
});

describe('sandbox warm pool', () => {
  test('a warm lease assigns a pre-started container to the session and the pool refills', async ({ sandbox }) => {
    const spec = sandbox.spec();
    const pool = createWarmPool(sandbox.host, spec, { size: 2 });
    await pool.ready();
    expect(pool.available).toBe(2);
    const before = await sandbox.docker.listContainers({ all: true, filters: { label: [`${LABEL.host}=${sandbox.hostId}`, `${LABEL.pool}=1`] } });
    const lease = await pool.lease({ sessionId: 'sess_warm' });
    // The lease is one of the containers started before it was asked for (speed is the bench's: sandbox.warm_lease_p50_ms).
    expect(before.map((c) => c.Id)).toContain(lease.containerId);
    const info = await sandbox.docker.getContainer(lease.containerId).inspect();
    expect(info.Config.Labels).toMatchObject({ [LABEL.pool]: '1', [LABEL.session]: '', [LABEL.host]: sandbox.hostId });
    expect(await sandbox.store.getLease(lease.id)).toMatchObject({ sessionId: 'sess_warm', containerId: lease.containerId, releasedAt: null });
    expect((await lease.exec('id -u; ls -A /workspace | wc -l')).stdout).toBe('1000\n0\n');
    await pool.ready();
    expect(pool.available).toBe(2);
    // The host's own sweeper keeps its live pool and the assigned lease.
    expect(await sandbox.host.sweep()).toEqual([]);
    await pool.close();
    expect((await sandbox.docker.listContainers({ all: true, filters: { label: [`${LABEL.pool}=1`, `${LABEL.host}=${sandbox.hostId}`] } })).map((c) => c.Id)).toEqual([lease.containerId]);
    await lease.release();
  });

  test('a later instance of the host sweeps the idle pool of a dead one but keeps its assigned leases', async ({ sandbox }) => {
    const spec = sandbox.spec();
    const deadHost = createSandboxHost({ docker: sandbox.docker, records: sandbox.store, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId });
    const pool = createWarmPool(deadHost, spec, { size: 2 });
    await pool.ready();
    const assigned = await pool.lease({ sessionId: 'sess_warm', autoHeartbeat: false });
    await pool.ready();
    await deadHost.close();
    // deadHost "dies" here: its pool is never closed.
    const swept = await sandbox.host.sweep();
    expect(swept).toHaveLength(2);
    expect(swept.every((s) => s.reason === 'unknown' && s.leaseId === null)).toBe(true);
    expect(await exists(sandbox.docker, assigned.containerId)).toBe(true);
    await assigned.release();
  });

});
