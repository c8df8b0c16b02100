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
  const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger });
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

  test('a fresh sandbox with nothing uploaded is its image: the upload snapshot names the environment\'s image with no commit, the next change builds on it, both restore and verify, and their tags going leaves the image; an image with no name of its own is committed instead', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_fresh_image', onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh('run_fresh_image', w.session, w.env, signal());
    const upload = await w.plan.freshImageSnapshot('run_fresh_image', w.session, w.env, lease, 'upload', signal());
    expect(upload, 'the environment image has its own name: no commit needed').toBeDefined();
    w.tags.push(upload!.record.id);
    expect(upload!.record.imageId).toBe(sandbox.imageId);
    expect(await w.images(), 'no image was committed for the upload snapshot').toEqual([]);
    await sandbox.store.commit({ sessionId: w.session, label: 'snap', snapshots: [{ ...upload!.record, runId: 'run_fresh_image', taskId: null }] });
    expect((await lease.exec(['sh', '-c', 'echo built > /workspace/out.txt'])).exitCode).toBe(0);
    const step = await w.snap(lease, 'step:0:build');
    expect(step.record.imageId).not.toBe(sandbox.imageId);
    expect(step.record.workspaceDigest).not.toBe(upload!.record.workspaceDigest);
    const before = await w.plan.restore('run_fresh_image', w.session, w.env, upload!.record.id, signal());
    expect(before.kind, before.kind === 'reconcile' ? before.reason : '').toBe('ok');
    if (before.kind === 'ok') expect((await before.lease.exec(['sh', '-c', 'test -e /workspace/out.txt'])).exitCode, 'the state before the step has no output').toBe(1);
    const after = await w.plan.restore('run_fresh_image', w.session, w.env, step.record.id, signal());
    expect(after.kind, after.kind === 'reconcile' ? after.reason : '').toBe('ok');
    if (after.kind === 'ok') expect((await after.lease.exec(['cat', '/workspace/out.txt'])).stdout.trim()).toBe('built');
    // Another environment on the same image with another workspace: its fresh state is not the
    // manifest this image already has (a diff of its snapshots would read the wrong one): committed.
    const other = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\nworkspace: { path: /bin }\n`, 'env.yaml');
    const otherLease = await w.plan.leaseFresh('run_fresh_other', w.session, other, signal());
    expect(await w.plan.freshImageSnapshot('run_fresh_other', w.session, other, otherLease, 'upload', signal()), 'a fresh state unlike the image\'s kept manifest is committed').toBeUndefined();
    await w.plan.finish('run_fresh_other');
    await w.plan.finish('run_fresh_image');
    expect(await w.engine.removeSnapshot(upload!.record.id)).toBe('untagged');
    expect(await w.engine.imageExists(sandbox.imageId), 'the environment image stays').toBe(true);

    // The same image under no name but a snapshot tag: retention removing that tag would remove it.
    const maker = await sandbox.docker.createContainer({ Image: sandbox.imageId, Cmd: ['true'], Labels: { 'berth.host': sandbox.hostId } });
    const unnamed = ((await maker.commit({ changes: 'LABEL berth.test.unnamed=1' })) as { Id: string }).Id;
    await maker.remove({ force: true });
    try {
      const env2 = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${unnamed}" }\n`, 'env.yaml');
      const lease2 = await w.plan.leaseFresh('run_fresh_unnamed', w.session, env2, signal());
      expect(await w.plan.freshImageSnapshot('run_fresh_unnamed', w.session, env2, lease2, 'upload', signal()), 'an image only snapshot tags would name is committed').toBeUndefined();
      await w.plan.finish('run_fresh_unnamed');
    } finally {
      await sandbox.docker.getImage(unnamed).remove({ force: true }).catch(() => {});
    }
  });

  test('a verification that trusts nothing hashes every file on the host from the layer, with no exec in the sandbox, and names a byte changed behind the same size and mtime', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_verify_host', onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh('run_verify_host', w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'mkdir -p /workspace/src && for i in $(seq 1 40); do echo $i > /workspace/src/f$i; done'])).exitCode).toBe(0);
    const snap = await w.snap(lease, 'upload');
    expect((await lease.exec(['sh', '-c', 'cd /workspace && m=$(stat -c %Y src/f7) && printf "X\\n" > src/f7 && touch -d @$m src/f7'])).exitCode).toBe(0);
    let execs = 0;
    const target = { containerId: lease.containerId, imageId: snap.record.imageId, workspacePath: '/workspace', exec: (cmd: string[], o: { stdin?: string; signal?: AbortSignal; user?: string }) => ((execs += 1), lease.exec(cmd, o)) };
    // A new snapshotter: what a restarted host has (no cache at all).
    const fresh = new Snapshotter({ engine: w.engine, store: sandbox.store, logger: sandbox.logger });
    const state = await fresh.workspaceState(target, signal(), { trust: false });
    expect(execs, 'no exec in the sandbox').toBe(0);
    expect(state.digest).not.toBe(snap.record.workspaceDigest);
    expect(state.changed).toEqual(['./src/f7']);
    expect(Object.keys(state.manifest).filter((p) => p.startsWith('./src/f'))).toHaveLength(40);
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

  test('a step that rewrote 5 of 300 files re-hashes only those 5 with no exec in the sandbox, a same-size rewrite with its mtime put back is still a change, and a restarted host re-hashes and catches it', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_five';
    const w = world(sandbox, runId, onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh(runId, w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'cd /workspace && for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p src/$d; for f in $(seq 0 29); do echo "$d $f" > src/$d/f$f.c; done; done'])).exitCode).toBe(0);
    // Files changed within the file clock's margin before a reading are "racy" and read again by the
    // next one (a same-tick rewrite keeps size and times): the upload's files are made older than that.
    await new Promise((r) => setTimeout(r, 200));
    await w.snap(lease, 'upload');
    expect((await lease.exec(['sh', '-c', 'cd /workspace && for d in 0 1 2 3 4; do echo rewritten > src/$d/f7.c; done'])).exitCode).toBe(0);
    let execs = 0;
    const target = {
      containerId: lease.containerId,
      imageId: lease.record.imageDigest,
      workspacePath: '/workspace',
      exec: (cmd: string[], o: { stdin?: string; signal?: AbortSignal; user?: string }) => {
        execs += 1;
        return lease.exec(cmd, o);
      },
    };
    const id = `snap_five_${Date.now().toString(36)}`;
    w.tags.push(id);
    const taken = await w.snapshots.take(target, { snapshotId: id, labels: { 'berth.snapshot': id, 'berth.session': w.session, 'berth.run': runId, 'berth.host': sandbox.hostId }, signal: signal() });
    expect(taken.reused).toBe(false);
    expect({ hashed: taken.hashed, execs }, 'only the 5 rewritten files were read, from the layer, with no exec').toEqual({ hashed: 5, execs: 0 });
    await sandbox.store.commit({ sessionId: w.session, label: 'snap', snapshots: [{ id, leaseId: lease.id, imageId: taken.imageId, workspaceDigest: taken.workspaceDigest, sizeBytes: taken.layerBytes, checkpoint: 'step:0', parentId: null, runId, taskId: null }] });
    // The layer scan agrees with a full listing that hashes every file.
    expect((await w.snapshots.workspaceState(target, signal(), { trust: false })).digest).toBe(taken.workspaceDigest);
    // One byte changed, size and mtime put back: the new ctime names it inside the live lease.
    expect((await lease.exec(['sh', '-c', 'cd /workspace && m=$(stat -c %Y src/3/f9.c) && printf "3 8\\n" > src/3/f9.c && touch -d @$m src/3/f9.c'])).exitCode).toBe(0);
    expect((await w.snapshots.workspaceState(target, signal())).digest, 'the live lease sees the change').not.toBe(taken.workspaceDigest);
    // A host that restarted trusts no cache: it re-hashes every file and refuses to resume on it.
    const engine = snapshotEngine(sandbox.docker);
    const restarted = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots: new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger }), clock: systemClock, logger: sandbox.logger });
    const resumed = await restarted.ensure(runId, w.session, w.env, { leaseId: lease.id, snapshotId: id, workspaceDigest: taken.workspaceDigest }, { inFlight: false, replay: 'never', signal: signal() });
    expect(resumed.kind).toBe('reconcile');
    if (resumed.kind === 'reconcile') expect(resumed.reason).toMatch(/workspace digest mismatch/);
    // The snapshot itself restores and verifies (every file re-hashed in the new container).
    const restored = await w.plan.restore(runId, w.session, w.env, id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind === 'ok') expect((await restored.lease.exec(['cat', '/workspace/src/3/f7.c', '/workspace/src/3/f9.c'])).stdout).toBe('rewritten\n3 9\n');
  });

  test('deletions, a directory made anew, a rename over a file and a type change read from the layer agree with a full listing', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_layer_ops';
    const w = world(sandbox, runId, onTestFinished);
    await sandbox.store.commit({ sessionId: w.session, label: 'seed', createSession: {} });
    const lease = await w.plan.leaseFresh(runId, w.session, w.env, signal());
    expect((await lease.exec(['sh', '-c', 'cd /workspace && mkdir -p a/b c d && echo 1 > a/b/x && echo 2 > a/y && echo 3 > c/z && echo 4 > d/w && echo 5 > top && ln -s top link'])).exitCode).toBe(0);
    const first = await w.snap(lease, 'upload');
    const target = { containerId: lease.containerId, imageId: lease.record.imageDigest, workspacePath: '/workspace', exec: (cmd: string[], o: { stdin?: string; signal?: AbortSignal; user?: string }) => lease.exec(cmd, o) };
    const steps = [
      'rm a/b/x',
      'rm -rf c && mkdir c && echo new > c/n',
      'mv d/w top',
      'rm link && mkdir link && echo in > link/f',
      'rm -rf a',
      'chmod 600 top',
    ];
    let before = first.record.workspaceDigest;
    for (const step of steps) {
      expect((await lease.exec(['sh', '-c', `cd /workspace && ${step}`])).exitCode).toBe(0);
      const cached = await w.snapshots.workspaceState(target, signal());
      const full = await w.snapshots.workspaceState(target, signal(), { trust: false });
      expect(cached.manifest, `after '${step}'`).toEqual(full.manifest);
      expect(cached.digest, `after '${step}' the digest moved`).not.toBe(before);
      before = cached.digest;
    }
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
    // The listing exec path (an engine whose layer this machine cannot read).
    const snapshots = new Snapshotter({ engine: { ...w.engine, layerDirs: undefined }, store: sandbox.store, logger: sandbox.logger });
    const err = await snapshots
      .take({ containerId: lease.containerId, imageId: sandbox.imageId, workspacePath: '/workspace', exec }, { snapshotId: id, labels: { 'berth.snapshot': id, 'berth.run': 'run_failed', 'berth.host': sandbox.hostId }, signal: signal() })
      .then(() => undefined, (e: unknown) => e);
    expect(String(err)).toMatch(/scanning \/workspace failed/);
    expect(await w.images(), 'the failed attempt left no image').toEqual([]);
  });
});
