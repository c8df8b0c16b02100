import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { vi } from 'vitest';
import { parseEnvironment } from '../../environment';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine } from '../../host/sandbox';
import { Snapshotter } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

/** A run's sandbox manager over the fixture's engine and store, the run's session seeded. */
async function uploader(sandbox: SandboxWorld, runId: string) {
  const env = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\nworkspace: { path: /workspace, owner: "1000:1000" }\n`, 'env.yaml');
  const engine = snapshotEngine(sandbox.docker);
  const snapshots = new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger });
  const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger });
  const session = `sess_${runId}`;
  await sandbox.store.commit({ sessionId: session, label: 'seed', createSession: {} });
  return { env, engine, plan, runId, session };
}

describe('a plan workspace uploaded as a layer of the sandbox image', { timeout: 180_000 }, () => {
  test('goes straight into the engine, never through the store, and the sandbox leased from it holds the workspace the upload snapshot records', async ({ sandbox, onTestFinished }) => {
    const ws = join(sandbox.dir, 'ws');
    mkdirSync(join(ws, 'src'), { recursive: true });
    writeFileSync(join(ws, 'src/main.c'), 'int main(void) { return 0; }\n');
    writeFileSync(join(ws, 'README'), 'hello\n');
    const { env, engine, plan, runId, session } = await uploader(sandbox, 'run_upload_layer');
    // Every write of a layer into the store, whatever its image.
    const stored = vi.spyOn(sandbox.store, 'putSnapshotDelta');

    const up = await plan.leaseUploaded(runId, session, env, ws, AbortSignal.timeout(120_000));
    expect(up, 'this engine takes layers built here').toBeDefined();
    onTestFinished(async () => {
      await plan.finish(runId).catch(() => {});
      await engine.removeSnapshot?.(up!.upload.snapshotId).catch(() => {});
    });
    // Recorded as the plan's prepare phase records it.
    await sandbox.store.commit({ sessionId: session, label: 'upload', snapshots: [{ ...up!.record, runId, taskId: null }] });
    expect(stored.mock.calls.map((c) => c[0].imageId), 'the upload layer was never written to the store').toEqual([]);
    expect(await sandbox.store.listSnapshotDeltas()).toEqual([]);
    // On the engine under the id the record names, with the run's labels (gc finds it by them if the record never commits).
    const image = (await sandbox.docker.getImage(up!.record.imageId).inspect()) as { Id: string; RepoTags: string[]; Config: { Labels: Record<string, string> } };
    expect(image.Id).toBe(up!.upload.imageId);
    expect(image.RepoTags).toContain(`berth-snapshot:${up!.upload.snapshotId}`);
    expect(image.Config.Labels).toMatchObject({ 'berth.snapshot': up!.upload.snapshotId, 'berth.session': session, 'berth.run': runId });
    // The container made from it holds the workspace, and the record's digest is its own reading.
    const cat = await up!.lease.exec(['sh', '-c', 'cat /workspace/README /workspace/src/main.c && stat -c %u:%g /workspace/src/main.c']);
    expect(cat.stdout).toBe('hello\nint main(void) { return 0; }\n1000:1000\n');
    expect(up!.record.workspaceDigest).toBe(await plan.digest(up!.lease, env, AbortSignal.timeout(60_000)));
  });

  test('a workspace of 5,000 small files and one large one is announced before it is packed, and the sandbox holds every byte of it', async ({ sandbox, onTestFinished }) => {
    const ws = join(sandbox.dir, 'big');
    for (let d = 0; d < 50; d++) {
      mkdirSync(join(ws, `d${d}`), { recursive: true });
      for (let f = 0; f < 100; f++) writeFileSync(join(ws, `d${d}`, `f${f}`), `${d}/${f}\n`);
    }
    // Over the size read whole (archive-pack.ts SMALL_FILE): streamed.
    writeFileSync(join(ws, 'large.bin'), Buffer.alloc(600 * 1024, 7));
    const { env, engine, plan, runId, session } = await uploader(sandbox, 'run_upload_big');
    const said: string[] = [];
    const up = await plan.leaseUploaded(runId, session, env, ws, AbortSignal.timeout(120_000), (m) => said.push(m));
    onTestFinished(async () => {
      await plan.finish(runId).catch(() => {});
      await engine.removeSnapshot?.(up!.upload.snapshotId).catch(() => {});
    });
    await sandbox.store.commit({ sessionId: session, label: 'upload', snapshots: [{ ...up!.record, runId, taskId: null }] });
    expect(said).toEqual([`uploading 5001 files (0.6 MB) from ${ws} as a layer of the sandbox's image`]);
    expect(up!.upload.files).toBe(5001);
    const check = await up!.lease.exec(['sh', '-c', 'find /workspace -type f | wc -l; cat /workspace/d49/f99 /workspace/d0/f0; wc -c < /workspace/large.bin; od -An -tu1 -N1 -j614399 /workspace/large.bin']);
    expect(check.stdout.split('\n').map((l) => l.trim())).toEqual(['5001', '49/99', '0/0', String(600 * 1024), '7', '']);
  });
});
