import pino from 'pino';
import { parseEnvironment, type Environment } from '../../environment';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine, type Lease } from '../../host/sandbox';
import { pruneRunning, pruneSnapshots, Snapshotter, type SnapshotEngine } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { runNode } from '../support/child';
import { bundledCli, lastJson } from '../support/plan-fixture';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

const signal = () => AbortSignal.timeout(120_000);
const LISTING = `cd /workspace && find . | sort | while read -r p; do stat -c '%n %F %a %Y' "$p"; if [ -f "$p" ]; then sha256sum "$p" | cut -c1-64; fi; done`;
// Files older than the file clock's margin before the first snapshot, so that it is not "racy" for the next.
const settle = () => new Promise((r) => setTimeout(r, 200));

/**
 * A run's sandbox whose host stopped before the engine loaded its two small snapshots: an engine
 * commit (`upload`), then two layers built on it (`step:0`, `step:1`), both still only in the
 * store. Returns the snapshots, the workspace listing they hold and a host restarted on the store.
 */
async function stoppedHostWithTwoLayers(sandbox: SandboxWorld, runId: string, onTestFinished: (fn: () => Promise<void>) => void) {
  const env: Environment = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\n`, 'env.yaml');
  const real = snapshotEngine(sandbox.docker);
  const stopped: SnapshotEngine = { ...real, loadLayer: () => Promise.reject(new Error('the host stopped before the engine loaded the image')) };
  // Silent: its background loads fail on purpose.
  const snapshots = new Snapshotter({ engine: stopped, store: sandbox.store, logger: pino({ level: 'silent' }) });
  const first = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger });
  const restarted = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots: new Snapshotter({ engine: real, store: sandbox.store, logger: sandbox.logger }), clock: systemClock, logger: sandbox.logger });
  onTestFinished(async () => {
    await first.finish(runId).catch(() => {});
    await restarted.finish(runId).catch(() => {});
  });
  const session = `sess_${runId}`;
  await sandbox.store.commit({ sessionId: session, label: 'seed', createSession: {} });
  const lease = await first.leaseFresh(runId, session, env, signal());
  const sh = async (l: Lease, script: string) => {
    const r = await l.exec(['sh', '-c', `cd /workspace && ${script}`]);
    expect(r.exitCode, r.stderr).toBe(0);
    return r.stdout;
  };
  const snap = async (checkpoint: string) => {
    const s = await first.snapshot(runId, session, env, first.held(runId) ?? lease, checkpoint, null, signal());
    await sandbox.store.commit({ sessionId: session, label: 'snap', snapshots: [{ ...s.record, runId, taskId: null }] });
    return s.record;
  };
  await sh(lease, 'mkdir src && for f in $(seq 0 49); do echo $f > src/f$f; done');
  await settle();
  const upload = await snap('upload');
  await sh(lease, 'echo one > src/f1 && rm src/f2');
  const one = await snap('step:0');
  await sh(lease, 'echo two > src/f3 && mkdir src/sub && echo s > src/sub/s');
  const two = await snap('step:1');
  await snapshots.images.settle();
  expect((await sandbox.store.listSnapshotDeltas()).map((d) => d.parentImageId), 'two layers, the first built on the committed image').toEqual([upload.imageId, one.imageId]);
  const listing = await sh(lease, LISTING);
  await lease.release();
  const restoresNewest = async () => {
    const restored = await restarted.restore(runId, session, env, two.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind === 'ok') expect(await sh(restored.lease, LISTING)).toBe(listing);
  };
  return { real, upload, one, two, restoresNewest };
}

describe('retention and pending delta layers', { timeout: 300_000 }, () => {
  test('retention without a loader (the end of a run) keeps the images pending layers are built on: the newest snapshot still restores and verifies', async ({ sandbox, onTestFinished }) => {
    const w = await stoppedHostWithTwoLayers(sandbox, 'run_keep_parents', onTestFinished);
    const pruned = await pruneSnapshots({ store: sandbox.store, removeSnapshot: w.real.removeSnapshot, clock: systemClock, logger: sandbox.logger }, { keepLast: 1 });
    await w.restoresNewest();
    expect(pruned.map((s) => s.checkpoint), 'both older snapshots hold what the newest layer is built on').toEqual([]);
    expect(await w.real.imageExists(w.upload.imageId)).toBe(true);
  });

  test("a running run's retention prunes its oldest snapshot as soon as the layer built right on it is loaded, before loading the layers further up: the newest still restores", async ({ sandbox, onTestFinished }) => {
    const w = await stoppedHostWithTwoLayers(sandbox, 'run_prune_as_it_goes', onTestFinished);
    const loader = new Snapshotter({ engine: w.real, store: sandbox.store, logger: sandbox.logger });
    const events: string[] = [];
    const name = new Map([[w.upload.imageId, 'upload'], [w.one.imageId, 'one'], [w.two.imageId, 'two']]);
    const pruned = await pruneRunning(
      {
        store: sandbox.store,
        clock: systemClock,
        logger: sandbox.logger,
        removeSnapshot: (id) => (events.push(`remove ${id === w.upload.id ? 'upload' : id === w.one.id ? 'one' : id}`), w.real.removeSnapshot(id)),
        materialize: (imageId) => (events.push(`load ${name.get(imageId) ?? imageId}`), loader.images.materialize(imageId)),
      },
      { runId: 'run_prune_as_it_goes', sessionId: 'sess_run_prune_as_it_goes', keepLast: 1, window: 10, keep: new Set() },
    );
    expect(pruned.map((s) => s.checkpoint).sort()).toEqual(['step:0', 'upload']);
    // Before: every layer was loaded first ('load one', 'load two'), then the removals began.
    // (The removal marks the record first, so the next candidate's check for its own layer, a
    // second 'load one' that finds it loaded, can come before 'remove upload'.)
    expect(events[0], events.join(', ')).toBe('load one');
    expect(events).toContain('load two');
    expect(events.indexOf('remove upload'), events.join(', ')).toBeLessThan(events.indexOf('load two'));
    expect(events.indexOf('remove one')).toBeGreaterThan(events.indexOf('load two'));
    await w.restoresNewest();
  });

  test('a layer the engine loaded after its host died is not loaded again once retention removed its image: the pruned snapshot gets no tag back', async ({ sandbox, onTestFinished }) => {
    const w = await stoppedHostWithTwoLayers(sandbox, 'run_stale_layer', onTestFinished);
    // The load the killed host asked for finished in the engine; the host never deleted the row.
    const row = (await sandbox.store.getSnapshotDelta(w.one.imageId))!;
    await w.real.loadLayer!({ config: row.config, layer: row.layer, tags: [w.one.id] });
    const loader = new Snapshotter({ engine: w.real, store: sandbox.store, logger: sandbox.logger });
    const pruned = await pruneRunning(
      { store: sandbox.store, clock: systemClock, logger: sandbox.logger, removeSnapshot: w.real.removeSnapshot, materialize: (imageId) => loader.images.materialize(imageId) },
      { runId: 'run_stale_layer', sessionId: 'sess_run_stale_layer', keepLast: 1, window: 10, keep: new Set() },
    );
    expect(pruned.map((s) => s.checkpoint).sort()).toEqual(['step:0', 'upload']);
    expect((await sandbox.store.listSnapshotDeltas()).map((d) => d.imageId), 'no layer left in the store').toEqual([]);
    // What a restore's load of a layer built on it, or a later pass, would ask: before, the row loaded
    // the removed image again with the pruned snapshot's tag.
    expect(await loader.images.materialize(w.one.imageId)).toBe(false);
    expect(await sandbox.docker.getImage(`berth-snapshot:${w.one.id}`).inspect().then(() => true, () => false), 'the pruned snapshot has no tag').toBe(false);
    await w.restoresNewest();
  });

  test('berth gc --keep 1 within its grace loads the pending layers before it prunes the image they are built on: the newest snapshot still restores and verifies', async ({ sandbox, onTestFinished }) => {
    const w = await stoppedHostWithTwoLayers(sandbox, 'run_gc_parents', onTestFinished);
    // The default grace (600 s) leaves young layers in the store; the prune below has no grace.
    const gc = await runNode(await bundledCli(), ['gc', '--keep', '1', '--json', '--store', sandbox.storePath], { BERTH_HOST_ID: sandbox.hostId });
    expect(gc.code, gc.stderr.slice(-800)).toBe(0);
    await w.restoresNewest();
    const out = lastJson<{ pruned: string[]; snapshotDeltas: { loaded: string[]; dropped: string[] } }>(gc);
    expect(out.snapshotDeltas, 'nothing settled: the layers are inside the grace').toEqual({ loaded: [], dropped: [] });
    expect(out.pruned.sort()).toEqual([w.upload.id, w.one.id].sort());
    expect(await w.real.imageExists(w.upload.imageId), 'the committed image went once the layers on it were loaded').toBe(false);
  });
});

