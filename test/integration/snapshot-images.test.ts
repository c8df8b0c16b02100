import pino from 'pino';
import { parseEnvironment } from '../../environment';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine } from '../../host/sandbox';
import { Snapshotter } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test } from '../support/sandbox-fixture';

const signal = () => AbortSignal.timeout(120_000);

describe('snapshot images', { timeout: 180_000 }, () => {
  test('a snapshot whose chain reaches the flatten depth becomes one layer with the same files, digest and config; the run moves onto it and can be restored from it', async ({ sandbox, onTestFinished }) => {
    const env = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\n`, 'env.yaml');
    const engine = snapshotEngine(sandbox.docker);
    const snapshots = new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger, flattenDepth: 4 });
    // Re-base after every snapshot: each one adds a level to the chain, as big steps do.
    const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger, rebaseBytes: 0 });
    const tags: string[] = [];
    onTestFinished(async () => {
      await plan.finish('run_flat').catch(() => {});
      for (const t of tags) await engine.removeSnapshot(t).catch(() => {});
    });
    await sandbox.store.commit({ sessionId: 'sess_flat', label: 'seed', createSession: {} });

    let lease = await plan.leaseFresh('run_flat', 'sess_flat', env, signal());
    const taken = [];
    for (let i = 1; i <= 3; i++) {
      const r = await lease.exec(['sh', '-c', `echo step${i} > /workspace/f${i} && ln -sf f${i} /workspace/latest && chmod 640 /workspace/f${i}`]);
      expect(r.exitCode, r.stderr).toBe(0);
      const s = await plan.snapshot('run_flat', 'sess_flat', env, lease, `step:${i}`, null, signal());
      tags.push(s.record.id);
      await sandbox.store.commit({ sessionId: 'sess_flat', label: 'snap', snapshots: [{ ...s.record, runId: 'run_flat', taskId: null }] });
      taken.push({ ...s.record, history: (await sandbox.docker.getImage(s.record.imageId).history()).length });
      expect(s.lease.id, 'the run moved to a container made from the snapshot').not.toBe(lease.id);
      lease = s.lease;
    }
    // tiny is one level; snapshots 1 and 2 are two and three deep; the third reached the bound (4) and became one.
    expect(taken.map((t) => t.history)).toEqual([2, 3, 1]);
    const flat = await sandbox.docker.getImage(taken[2]!.imageId).inspect();
    expect(flat.RootFS.Layers).toHaveLength(1);
    expect(flat.RepoTags).toEqual([`berth-snapshot:${taken[2]!.id}`]);
    expect(flat.Config.Labels).toMatchObject({ 'berth.snapshot': taken[2]!.id, 'berth.run': 'run_flat', 'berth.host': sandbox.hostId });
    // The deep image it replaced is gone, and so is the container used to export it.
    expect((await sandbox.docker.listImages({ filters: { label: [`berth.snapshot=${taken[2]!.id}`] } })).map((i) => i.Id)).toEqual([taken[2]!.imageId]);
    const ours = await sandbox.docker.listContainers({ all: true, filters: { label: [`berth.host=${sandbox.hostId}`] } });
    expect(ours.map((c) => c.Id)).toEqual([lease.containerId]);
    const base = await sandbox.docker.getImage(sandbox.imageId).inspect();
    expect(flat.Config.Env).toEqual(base.Config.Env);

    // The container the run moved to stands on the flat image and sees every file as written.
    const now = await lease.exec(['sh', '-c', 'cd /workspace && cat f1 f2 f3 && readlink latest && stat -c %a f3 && id -u']);
    expect(now.stdout).toBe('step1\nstep2\nstep3\nf3\n640\n1000\n');
    expect((await sandbox.docker.getContainer(lease.containerId).inspect()).Image).toBe(taken[2]!.imageId);
    expect(await plan.digest(lease, env, signal())).toBe(taken[2]!.workspaceDigest);

    // Another snapshot on the flat image is two deep again, and a restore of the flat one is exact.
    await lease.exec(['sh', '-c', 'echo step4 > /workspace/f4']);
    const fourth = await plan.snapshot('run_flat', 'sess_flat', env, lease, 'step:4', null, signal());
    tags.push(fourth.record.id);
    // Recorded as the run would, so the store accounts for every image this test leaves to the fixture.
    await sandbox.store.commit({ sessionId: 'sess_flat', label: 'snap', snapshots: [{ ...fourth.record, runId: 'run_flat', taskId: null }] });
    expect((await sandbox.docker.getImage(fourth.record.imageId).history()).length).toBe(2);
    const restored = await plan.restore('run_flat', 'sess_flat', env, taken[2]!.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind === 'ok') {
      expect(restored.pointer.workspaceDigest).toBe(taken[2]!.workspaceDigest);
      expect((await restored.lease.exec(['ls', '/workspace'])).stdout).toBe('f1\nf2\nf3\nlatest\n');
    }
  });

  test('a writer still running during a snapshot makes it be taken again paused, and the superseded image is removed', async ({ sandbox, onTestFinished }) => {
    const env = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\n`, 'env.yaml');
    const engine = snapshotEngine(sandbox.docker);
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push((JSON.parse(line) as { msg: string }).msg) });
    const snapshots = new Snapshotter({ engine, store: sandbox.store, logger });
    const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger });
    const tags: string[] = [];
    onTestFinished(async () => {
      await plan.finish('run_busy').catch(() => {});
      for (const t of tags) await engine.removeSnapshot(t).catch(() => {});
    });
    const lease = await plan.leaseFresh('run_busy', 'sess_busy', env, signal());
    // A new file every 20 ms: the change set after the commit always differs.
    // keepProcesses: the writer must outlive the exec that starts it (by default nothing does).
    await lease.exec(['sh', '-c', 'i=0; (while :; do i=$((i+1)); echo $i > /workspace/w$i; sleep 0.02; done) >/dev/null 2>&1 &'], { keepProcesses: true });
    const id = `snap_busy_${Date.now().toString(36)}`;
    const s = await snapshots.take({ containerId: lease.containerId, imageId: sandbox.imageId, workspacePath: '/workspace', exec: (argv, o) => lease.exec(argv, o) }, { snapshotId: id, labels: { 'berth.snapshot': id, 'berth.host': sandbox.hostId }, signal: signal() });
    tags.push(id);
    expect(warnings).toContain('workspace changed during the snapshot; taking it again with the container paused');
    expect((await sandbox.docker.listImages({ filters: { label: [`berth.snapshot=${id}`] } })).map((i) => i.Id)).toEqual([s.imageId]);
    // Taken below the layer that records snapshots, so no record keeps it: remove it here, before the
    // fixture's leak check (onTestFinished runs after that check and only covers a failure above).
    await plan.finish('run_busy');
    await engine.removeSnapshot(id);
  });
});
