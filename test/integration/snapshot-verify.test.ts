import { createHash } from 'node:crypto';
import { parseEnvironment, type Environment } from '../../environment';
import { isBerthError } from '../../host/errors';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine, type Lease } from '../../host/sandbox';
import { Snapshotter } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

const signal = () => AbortSignal.timeout(120_000);

/** An image made from tiny by running `script` as root in a container of it, with `changes` (Dockerfile lines); removed after the test. */
async function derivedImage(sandbox: SandboxWorld, onTestFinished: (fn: () => Promise<void>) => void, script: string, changes: string[] = []): Promise<string> {
  const c = await sandbox.docker.createContainer({ Image: sandbox.imageId, Entrypoint: [], Cmd: ['sh', '-c', script], User: '0:0', Labels: { 'berth.host': sandbox.hostId } });
  await c.start();
  await c.wait();
  const res = (await c.commit({ changes, Labels: { 'berth.host': sandbox.hostId } } as object)) as { Id: string };
  await c.remove({ force: true });
  const id = (await sandbox.docker.getImage(res.Id).inspect()).Id;
  onTestFinished(async () => {
    await sandbox.docker.getImage(id).remove({ force: true }).catch(() => {});
  });
  return id;
}

function world(sandbox: SandboxWorld, runId: string, imageId: string, onTestFinished: (fn: () => Promise<void>) => void) {
  const env: Environment = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${imageId}" }\n`, 'env.yaml');
  const engine = snapshotEngine(sandbox.docker);
  const snapshots = new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger });
  const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger });
  const tags: string[] = [];
  onTestFinished(async () => {
    await plan.finish(runId).catch(() => {});
    for (const t of tags.reverse()) await engine.removeSnapshot(t).catch(() => {});
  });
  const session = `sess_${runId}`;
  const snap = async (checkpoint: string) => {
    const s = await plan.snapshot(runId, session, env, plan.held(runId)!, checkpoint, null, signal());
    tags.push(s.record.id);
    await sandbox.store.commit({ sessionId: session, label: 'snap', snapshots: [{ ...s.record, runId, taskId: null }] });
    return s;
  };
  const lease = async () => {
    await sandbox.store.commit({ sessionId: session, label: 'seed', createSession: {} });
    return plan.leaseFresh(runId, session, env, signal());
  };
  return { env, plan, session, snap, lease };
}

const sh = async (lease: Lease, script: string) => {
  const r = await lease.exec(['sh', '-c', script]);
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout;
};

describe('workspace digests that see everything', { timeout: 180_000 }, () => {
  test('refuses at lease time an image that declares a VOLUME over the workspace, which would hide it from every snapshot', async ({ sandbox, onTestFinished }) => {
    const image = await derivedImage(sandbox, onTestFinished, 'true', ['VOLUME /workspace']);
    const w = world(sandbox, 'run_volume', image, onTestFinished);
    const err = await w.lease().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isBerthError(err, 'workspace_hidden'), String(err)).toBe(true);
    expect(String((err as Error).message)).toMatch(/\/workspace/);
    const left = await sandbox.docker.listContainers({ all: true, filters: { label: [`berth.host=${sandbox.hostId}`] } });
    expect(left).toEqual([]);
  });

  test('sees changes in a workspace whose path is a symlink to another directory', async ({ sandbox, onTestFinished }) => {
    const image = await derivedImage(sandbox, onTestFinished, 'mkdir -p /data/ws && chown 1000:1000 /data/ws && rmdir /workspace && ln -s /data/ws /workspace');
    const w = world(sandbox, 'run_link', image, onTestFinished);
    const lease = await w.lease();
    await sh(lease, 'echo one > /workspace/a');
    const first = await w.snap('step:0');
    await sh(lease, 'echo two > /workspace/a');
    const now = await w.plan.digest(lease, w.env, signal());
    expect(now, 'the digest follows the change behind the symlink').not.toBe(first.record.workspaceDigest);
    const second = await w.snap('step:1');
    const restored = await w.plan.restore('run_link', w.session, w.env, second.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind === 'ok') expect(await sh(restored.lease, 'cat /workspace/a')).toBe('two\n');
  });

  test('never records a manifest scanned from a container under the image it was made from', async ({ sandbox, onTestFinished }) => {
    const image = await derivedImage(sandbox, onTestFinished, 'mkdir -p /data/ws && chown 1000:1000 /data/ws && rmdir /workspace && ln -s /data/ws /workspace');
    const w = world(sandbox, 'run_cache', image, onTestFinished);
    const lease = await w.lease();
    await sh(lease, 'echo changed > /workspace/a');
    await w.plan.digest(lease, w.env, signal());
    await w.snap('step:0');
    expect(await sandbox.store.getWorkspaceManifest(image)).toBeUndefined();
  });

  test('hashes a file the workspace owner cannot read: a changed byte behind the same size and mtime changes the digest, and its snapshot restores and verifies', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_unreadable', sandbox.imageId, onTestFinished);
    const lease = await w.lease();
    await sh(lease, 'printf AAAA > /workspace/secret && touch -d @1700000000 /workspace/secret && chmod 000 /workspace/secret');
    const before = await w.plan.digest(lease, w.env, signal());
    await sh(lease, 'chmod 600 /workspace/secret && printf BBBB > /workspace/secret && touch -d @1700000000 /workspace/secret && chmod 000 /workspace/secret');
    const after = await w.plan.digest(lease, w.env, signal());
    expect(after, 'the unreadable file was compared by its bytes').not.toBe(before);
    const s = await w.snap('step:0');
    const restored = await w.plan.restore('run_unreadable', w.session, w.env, s.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
  });

  test('catches a background writer that rewrites an already changed file with the same size between scan and commit', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_rewrite', sandbox.imageId, onTestFinished);
    const lease = await w.lease();
    await sh(lease, 'printf %08d 0 > /workspace/busy');
    // Same size every time; only the bytes change, every few milliseconds.
    // keepProcesses: the writer must outlive the exec that starts it (by default nothing does).
    const started = await lease.exec(['sh', '-c', '(i=0; while :; do i=$((i+1)); printf %08d $i > /workspace/busy; done) >/dev/null 2>&1 & echo $! > /dev/shm/writer.pid'], { keepProcesses: true });
    expect(started.exitCode, started.stderr).toBe(0);
    const s = await w.snap('step:0');
    await sh(lease, 'kill $(cat /dev/shm/writer.pid)');
    // What the image really holds must be what the record says.
    const restored = await w.plan.restore('run_rewrite', w.session, w.env, s.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind !== 'ok') return;
    const bytes = await sh(restored.lease, 'cat /workspace/busy');
    const manifest = (await sandbox.store.getWorkspaceManifest(s.record.imageId)) as Record<string, string>;
    expect(manifest['./busy']).toBe(`f:644:${createHash('sha256').update(bytes).digest('hex')}`);
  });
});
