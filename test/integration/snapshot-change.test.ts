import { parseEnvironment, type Environment } from '../../environment';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine } from '../../host/sandbox';
import { Snapshotter } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

const signal = () => AbortSignal.timeout(120_000);

function world(sandbox: SandboxWorld, runId: string, onTestFinished: (fn: () => Promise<void>) => void) {
  const env: Environment = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\n`, 'env.yaml');
  const engine = snapshotEngine(sandbox.docker);
  const snapshots = new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger });
  const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, imageExists: engine.imageExists, clock: systemClock, logger: sandbox.logger });
  const tags: string[] = [];
  onTestFinished(async () => {
    await plan.finish(runId).catch(() => {});
    for (const t of tags.reverse()) await engine.removeSnapshot(t).catch(() => {});
  });
  const session = `sess_${runId}`;
  const snap = async (lease: Parameters<RunSandbox['snapshot']>[3], checkpoint: string) => {
    const s = await plan.snapshot(runId, session, env, plan.held(runId) ?? lease, checkpoint, null, signal());
    tags.push(s.record.id);
    await sandbox.store.commit({ sessionId: session, label: 'snap', snapshots: [{ ...s.record, runId, taskId: null }] });
    return s;
  };
  const images = async () => (await sandbox.docker.listImages({ filters: { label: [`berth.run=${runId}`] } })).map((i) => i.Id).sort();
  return { env, engine, snapshots, plan, session, snap, images, tags };
}

describe('snapshot cost follows the change', { timeout: 180_000 }, () => {
  test('a step that changed nothing records a snapshot pointing at the previous image without committing, and a restore from it verifies', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_noop', onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh('run_noop', w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'mkdir -p /workspace/src && for i in $(seq 1 20); do echo $i > /workspace/src/f$i; done'])).exitCode).toBe(0);
    const first = await w.snap(lease, 'upload');
    expect(await w.images()).toEqual([first.record.imageId]);
    // A step that only reads.
    expect((await lease.exec(['sh', '-c', 'cat /workspace/src/* > /dev/null'])).exitCode).toBe(0);
    const second = await w.snap(lease, 'step:0:test');
    expect(second.record.imageId).toBe(first.record.imageId);
    expect(second.record.workspaceDigest).toBe(first.record.workspaceDigest);
    expect(await w.images(), 'no new image was committed').toEqual([first.record.imageId]);
    // The record still names its own snapshot, and the image outlives the pruning of the first record.
    expect(second.record.id).not.toBe(first.record.id);
    await w.engine.removeSnapshot(first.record.id);
    const restored = await w.plan.restore('run_noop', w.session, w.env, second.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind === 'ok') expect(restored.pointer.workspaceDigest).toBe(second.record.workspaceDigest);
  });

  test('a same-size rewrite with the old mtime put back, right after a snapshot, is still a change for the next one', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_sneaky', onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh('run_sneaky', w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'printf AAAA > /workspace/a && touch -d @1700000000 /workspace/a'])).exitCode).toBe(0);
    const first = await w.snap(lease, 'upload');
    expect((await lease.exec(['sh', '-c', 'printf BBBB > /workspace/a && touch -d @1700000000 /workspace/a'])).exitCode).toBe(0);
    const second = await w.snap(lease, 'step:0');
    expect(second.record.imageId).not.toBe(first.record.imageId);
    expect(second.record.workspaceDigest).not.toBe(first.record.workspaceDigest);
    const restored = await w.plan.restore('run_sneaky', w.session, w.env, second.record.id, signal());
    expect(restored.kind).toBe('ok');
    if (restored.kind === 'ok') expect((await restored.lease.exec(['cat', '/workspace/a'])).stdout).toBe('BBBB');
  });

  test('a step that changed only files outside the workspace is still committed', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_outside', onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh('run_outside', w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'echo a > /workspace/a'])).exitCode).toBe(0);
    const first = await w.snap(lease, 'upload');
    expect((await lease.exec(['sh', '-c', 'echo tool > /tmp/installed-tool'])).exitCode).toBe(0);
    const second = await w.snap(lease, 'step:0:install');
    expect(second.record.imageId).not.toBe(first.record.imageId);
    const restored = await w.plan.restore('run_outside', w.session, w.env, second.record.id, signal());
    expect(restored.kind).toBe('ok');
    if (restored.kind === 'ok') expect((await restored.lease.exec(['cat', '/tmp/installed-tool'])).stdout).toBe('tool\n');
  });
});

describe('snapshot images nobody records', { timeout: 180_000 }, () => {
  test('a snapshot attempt that fails after its commit removes the image it made', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_failed', onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh('run_failed', w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'echo a > /workspace/a'])).exitCode).toBe(0);
    let calls = 0;
    const id = `snap_failed_${Date.now().toString(36)}`;
    w.tags.push(id);
    // The scan after the commit fails (as a disk-full workspace's did, retry after retry).
    const exec = async (argv: string[], o: { stdin?: string; signal?: AbortSignal; user?: string }) => {
      calls += 1;
      if (calls === 2) return { exitCode: 1, stdout: '', stderr: 'No space left on device', truncated: false };
      return lease.exec(argv, o);
    };
    const err = await w.snapshots
      .take({ containerId: lease.containerId, imageId: sandbox.imageId, workspacePath: '/workspace', exec }, { snapshotId: id, labels: { 'berth.snapshot': id, 'berth.run': 'run_failed', 'berth.host': sandbox.hostId }, signal: signal() })
      .then(() => undefined, (e: unknown) => e);
    expect(String(err)).toMatch(/scanning \/workspace failed/);
    expect(await w.images(), 'the failed attempt left no image').toEqual([]);
  });
});
