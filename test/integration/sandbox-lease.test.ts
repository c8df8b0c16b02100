import Dockerode from 'dockerode';
import { isBerthError } from '../../host/errors';
import { createSandboxHost, LABEL } from '../../host/sandbox';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test } from '../support/sandbox-fixture';

describe('sandbox lease', () => {
  test('a lease starts a hardened, limited, labelled container from the pinned image id and records it', async ({ sandbox }) => {
    const spec = sandbox.spec({ resources: { cpus: 0.5, memoryMb: 128, pids: 64 } });
    const lease = await sandbox.host.lease(spec, { sessionId: 'sess_a' });
    const info = await sandbox.docker.getContainer(lease.containerId).inspect();
    expect(info.State.Running).toBe(true);
    expect(info.Image).toBe(sandbox.imageId);
    const hc = info.HostConfig;
    expect(hc.NanoCpus).toBe(500_000_000);
    expect(hc.Memory).toBe(128 * 1024 * 1024);
    expect(hc.MemorySwap).toBe(128 * 1024 * 1024);
    expect(hc.PidsLimit).toBe(64);
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.SecurityOpt).toEqual(['no-new-privileges']);
    expect(hc.NetworkMode).toBe('none');
    expect(hc.Init).toBe(true);
    expect(hc.Binds ?? []).toEqual([]);
    expect(info.Mounts.filter((m) => m.Type === 'bind' || m.Type === 'volume')).toEqual([]);
    const labels = info.Config.Labels;
    expect(labels).toMatchObject({
      [LABEL.managed]: '1',
      [LABEL.session]: 'sess_a',
      [LABEL.lease]: lease.id,
      [LABEL.host]: sandbox.hostId,
      [LABEL.fingerprint]: spec.envFingerprint,
    });
    expect(Number(labels[LABEL.created])).toBeGreaterThan(Date.now() - 60_000);
    const record = await sandbox.store.getLease(lease.id);
    expect(record).toMatchObject({ containerId: lease.containerId, sessionId: 'sess_a', hostId: sandbox.hostId, imageDigest: sandbox.imageId, releasedAt: null });
    expect(record!.expiresAt - record!.createdAt).toBe(spec.lease.ttlS * 1000);
    await lease.release();
  });

  test('a digest that is not sha256 plus 64 hex is refused as image_not_pinned before anything is created', async ({ sandbox }) => {
    const spec = { ...sandbox.spec(), imageDigest: 'berth/tiny:latest' };
    const err = await sandbox.host.lease(spec, { sessionId: 's' }).catch((e: unknown) => e);
    expect(isBerthError(err, 'image_not_pinned')).toBe(true);
    expect(await sandbox.docker.listContainers({ all: true, filters: { label: [`${LABEL.host}=${sandbox.hostId}`] } })).toEqual([]);
  });

  test('a pinned id that no local image has is refused as image_missing', async ({ sandbox }) => {
    const spec = { ...sandbox.spec(), imageDigest: 'sha256:' + '0'.repeat(64) };
    const err = await sandbox.host.lease(spec, { sessionId: 's' }).catch((e: unknown) => e);
    expect(isBerthError(err, 'image_missing')).toBe(true);
  });

  test('resolveImageDigest gives the image id of a local ref and image_missing for an absent one', async ({ sandbox }) => {
    expect(await sandbox.host.resolveImageDigest('berth/tiny:latest')).toBe(sandbox.imageId);
    const err = await sandbox.host.resolveImageDigest('berth/does-not-exist:nope').catch((e: unknown) => e);
    expect(isBerthError(err, 'image_missing')).toBe(true);
  });

  test('release removes the container and marks the record released; a released lease refuses work', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    await lease.release();
    await lease.release();
    const gone = await sandbox.docker.getContainer(lease.containerId).inspect().catch((e: { statusCode?: number }) => e.statusCode);
    expect(gone).toBe(404);
    expect((await sandbox.store.getLease(lease.id))!.releasedAt).not.toBeNull();
    const err = await Promise.resolve()
      .then(() => lease.exec('true'))
      .catch((e: unknown) => e);
    expect(isBerthError(err, 'lease_released')).toBe(true);
  });

  test('Symbol.asyncDispose releases the lease, so `await using` cleans up', async ({ sandbox }) => {
    let containerId = '';
    {
      const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
      containerId = lease.containerId;
      expect(typeof lease[Symbol.asyncDispose]).toBe('function');
      await lease[Symbol.asyncDispose]();
    }
    const gone = await sandbox.docker.getContainer(containerId).inspect().catch((e: { statusCode?: number }) => e.statusCode);
    expect(gone).toBe(404);
  });

  test('heartbeat extends the record; after release it reports the lease lost', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec({ lease: { ttlS: 60 } }), { sessionId: 's', autoHeartbeat: false });
    const before = lease.record.expiresAt;
    await new Promise((r) => setTimeout(r, 20));
    expect(await lease.heartbeat()).toBe(true);
    expect(lease.record.expiresAt).toBeGreaterThan(before);
    expect((await sandbox.store.getLease(lease.id))!.expiresAt).toBe(lease.record.expiresAt);
    await sandbox.store.releaseLease(lease.id, Date.now());
    expect(await lease.heartbeat()).toBe(false);
    expect(lease.lost).toBe(true);
    await lease.release();
  });

  test('the automatic heartbeat extends the lease on its own', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec({ lease: { ttlS: 60, heartbeatS: 0.2 } }), { sessionId: 's' });
    const first = (await sandbox.store.getLease(lease.id))!.expiresAt;
    await new Promise((r) => setTimeout(r, 700));
    expect((await sandbox.store.getLease(lease.id))!.expiresAt).toBeGreaterThan(first);
    await lease.release();
  });
});

describe('sandbox verify', () => {
  test('verify accepts a running container of the recorded image and fingerprint', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    expect(await sandbox.host.verify(lease.record)).toEqual({ ok: true });
    await lease.release();
  });

  test('verify reports a removed container as container_missing and a stopped one as container_stopped', async ({ sandbox }) => {
    const a = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const b = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    await sandbox.docker.getContainer(a.containerId).remove({ force: true });
    await sandbox.docker.getContainer(b.containerId).stop({ t: 0 });
    expect(await sandbox.host.verify(a.record)).toMatchObject({ ok: false, code: 'container_missing' });
    expect(await sandbox.host.verify(b.record)).toMatchObject({ ok: false, code: 'container_stopped' });
    await b.release();
  });

  test('the lease watchdog waits without forking, so a fork bomb holding every pid cannot stop the sandbox: its idle loop has no child', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    // "pid ppid" of every process; the watchdog is PID 1's only child (no command left an orphan).
    const script = 'for f in /proc/[0-9]*/stat; do read -r l < $f || continue; p=${f#/proc/}; p=${p%/stat}; set -- ${l##*) }; echo "$p $2"; done';
    const first = (await lease.exec(['/bin/sh', '-c', script])).stdout.trim().split('\n').map((l) => l.split(' '));
    const wd = first.filter(([, ppid]) => ppid === '1').map(([pid]) => pid);
    expect(wd).toHaveLength(1);
    // Sampled over more than one check interval (5 s for this TTL): a `sleep` between checks would show.
    for (let i = 0; i < 4; i += 1) {
      const pairs = (await lease.exec(['/bin/sh', '-c', script])).stdout.trim().split('\n').map((l) => l.split(' '));
      expect(pairs.filter(([, ppid]) => ppid === wd[0]).map(([pid]) => pid)).toEqual([]);
      await new Promise((r) => setTimeout(r, 1500));
    }
  });

  test('a command in a sandbox whose watchdog stopped it says so: the exit, its time and the watchdog\'s last words', async ({ sandbox }) => {
    // No heartbeat within the test: a renewal would move the deadline written below.
    await using lease = await sandbox.host.lease(sandbox.spec({ lease: { heartbeatS: 280 } }), { sessionId: 's' });
    const c = sandbox.docker.getContainer(lease.containerId);
    // A deadline in the past, as a host that stopped renewing leaves it once the TTL ran out.
    await (await c.exec({ Cmd: ['/bin/sh', '-c', 'echo 1 > /dev/berth/lease-until'], User: '0' })).start({ Detach: true });
    await c.wait();
    const err = await lease.exec('echo never').then(() => undefined, (e: unknown) => e as Error & { code?: string });
    expect(err?.code).toBe('sandbox_unavailable');
    expect(err?.message).toMatch(/the container is exited \(exit code 0, since \d{4}-/);
    expect(err?.message).toContain('the lease was not renewed');
  });

  test('verify reports a container running another image as image_mismatch', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    await lease.writeFile('marker', 'x');
    // A second image: the same sandbox committed, so it differs from the recorded id.
    const committed = (await sandbox.docker.getContainer(lease.containerId).commit({ repo: 'berth-test/verify-other', tag: sandbox.hostId.slice(-12) })) as { Id: string };
    try {
      const other = await sandbox.host.lease({ ...sandbox.spec(), imageDigest: committed.Id }, { sessionId: 's' });
      const forged = { ...other.record, imageDigest: sandbox.imageId };
      expect(await sandbox.host.verify(forged)).toMatchObject({ ok: false, code: 'image_mismatch' });
      await other.release();
    } finally {
      await sandbox.docker.getImage(committed.Id).remove({ force: true }).catch(() => undefined);
      await lease.release();
    }
  });

  test('verify reports a container of another environment as fingerprint_mismatch', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    expect(await sandbox.host.verify({ ...lease.record, envFingerprint: 'sha256:' + 'f'.repeat(64) })).toMatchObject({ ok: false, code: 'fingerprint_mismatch' });
    await lease.release();
  });

  test('verify reports an engine that cannot be reached as engine_unreachable', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const offline = createSandboxHost({
      docker: new Dockerode({ socketPath: '/nonexistent/docker.sock' }),
      records: sandbox.store,
      clock: systemClock,
      logger: sandbox.logger,
      hostId: sandbox.hostId,
    });
    expect(await offline.verify(lease.record)).toMatchObject({ ok: false, code: 'engine_unreachable' });
    await offline.close();
    await lease.release();
  });

  test('releasing a lease while a command runs ends that command with a result, not a hang', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const running = lease.exec('sleep 1000');
    await new Promise((r) => setTimeout(r, 300));
    await lease.release();
    const r = await running;
    expect(r.exitCode).not.toBe(0);
    // Far below the command's own 1000 s (the bound leaves room for a loaded machine).
    expect(r.durationMs).toBeLessThan(120_000);
  });

  test('attach takes up a verified lease again and runs commands in the same container', async ({ sandbox }) => {
    const lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's', autoHeartbeat: false });
    await lease.writeFile('kept.txt', 'still here');
    const again = await sandbox.host.attach(sandbox.spec(), lease.record, { autoHeartbeat: false });
    expect(again.containerId).toBe(lease.containerId);
    expect((await again.exec('cat kept.txt')).stdout).toBe('still here');
    await again.release();
  });
});
