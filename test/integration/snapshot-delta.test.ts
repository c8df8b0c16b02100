import { parseEnvironment, type Environment } from '../../environment';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine, type Lease } from '../../host/sandbox';
import { settleSnapshotDeltas, Snapshotter, type SnapshotEngine } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

const signal = () => AbortSignal.timeout(120_000);

/**
 * Every workspace path with its type, mode, owner, whole-second mtime and content (or link target):
 * what a restore must give back, beyond the manifest's content and modes.
 */
const LISTING = `cd /workspace && find . | sort | while read -r p; do
  stat -c '%n %F %a %u:%g %Y' "$p"
  if [ -L "$p" ]; then readlink "$p"; elif [ -f "$p" ]; then sha256sum "$p" | cut -c1-64; fi
done`;

/** A plan-run sandbox world whose engine counts `docker commit`s (and can be told not to load images, as a host that stopped would not). */
function world(sandbox: SandboxWorld, runId: string, onTestFinished: (fn: () => Promise<void>) => void, o: { load?: boolean; deltaMaxBytes?: number } = {}) {
  const env: Environment = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\n`, 'env.yaml');
  const real = snapshotEngine(sandbox.docker);
  const counts = { commits: 0 };
  const engine: SnapshotEngine = {
    ...real,
    commit: (id, opts) => {
      counts.commits += 1;
      return real.commit(id, opts);
    },
    ...(o.load === false ? { loadLayer: () => new Promise<string>((_, reject) => setTimeout(() => reject(new Error('the host stopped before the engine loaded the image')), 10)) } : {}),
  };
  const snapshots = new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger, ...(o.deltaMaxBytes !== undefined ? { deltaMaxBytes: o.deltaMaxBytes } : {}) });
  const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger });
  const tags: string[] = [];
  onTestFinished(async () => {
    await plan.finish(runId).catch(() => {});
    for (const t of tags.reverse()) await real.removeSnapshot(t).catch(() => {});
  });
  const session = `sess_${runId}`;
  const snap = async (lease: Lease, checkpoint: string) => {
    const s = await plan.snapshot(runId, session, env, plan.held(runId) ?? lease, checkpoint, null, signal());
    tags.push(s.record.id);
    await sandbox.store.commit({ sessionId: session, label: 'snap', snapshots: [{ ...s.record, runId, taskId: null }] });
    return s;
  };
  const run = async (lease: Lease, script: string) => {
    const r = await lease.exec(['sh', '-c', `cd /workspace && ${script}`]);
    expect(r.exitCode, r.stderr).toBe(0);
    return r.stdout;
  };
  const start = async () => {
    await sandbox.store.commit({ sessionId: session, label: 'seed', createSession: {} });
    return plan.leaseFresh(runId, session, env, signal());
  };
  const layersOf = async (imageId: string) => ((await sandbox.docker.getImage(imageId).inspect()) as { RootFS: { Layers: string[] } }).RootFS.Layers.length;
  return { env, real, counts, snapshots, plan, session, snap, run, start, tags, layersOf };
}

// Files older than the file clock's margin before the first snapshot, so that it is not "racy" for the next.
const settle = () => new Promise((r) => setTimeout(r, 200));

describe('small snapshots as layers built on the host', { timeout: 180_000 }, () => {
  test('a step that changed 5 of 300 files is snapshotted with no engine commit; the engine loads the layer in the background, and a restore gives back every file, mode, owner, time, link and removal', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_delta';
    const w = world(sandbox, runId, onTestFinished);
    const lease = await w.start();
    await w.run(lease, 'for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p src/$d; for f in $(seq 0 29); do echo "$d $f" > src/$d/f$f.c; done; done; mkdir -p gone/deep keep && echo x > gone/deep/x && echo k > keep/k && echo t > typed && ln -s src/0 link0');
    await settle();
    const upload = await w.snap(lease, 'upload');
    expect(w.counts.commits, 'the first snapshot has no image to build on: committed').toBe(1);
    const uploadLayers = await w.layersOf(upload.record.imageId);
    await w.run(lease, [
      'for d in 0 1 2 3 4; do echo rewritten > src/$d/f7.c; done',
      'chmod 600 src/5/f1.c && chown 1000:1000 src/6/f2.c && touch -d @1600000000 src/7/f3.c',
      'rm src/8/f4.c && rm -rf gone && rm -rf keep && mkdir keep && echo new > keep/n',
      'rm typed && mkdir typed && echo in > typed/f',
      'ln -s keep/n link1 && rm link0 && ln -s src/9 link0',
      'mkdir -p fresh/a/b && echo deep > fresh/a/b/c',
      'rm -rf src/9 && echo nine > src/9',
      `echo long > fresh/${'n'.repeat(150)} && echo sp > 'fresh/a name with spaces' && echo u > fresh/ünïcødé`,
      'touch -d @2000000000 fresh/future',
    ].join(' && '));
    const before = await w.run(lease, LISTING);
    const step = await w.snap(lease, 'step:0');
    expect(w.counts.commits, 'no engine commit for a small change').toBe(1);
    expect(step.record.imageId).not.toBe(upload.record.imageId);
    expect(step.record.sizeBytes, 'the layer holds the change, not the workspace').toBeLessThan(64 * 1024);
    // The engine loads the layer in the background; the store's copy is gone once it has.
    await w.snapshots.images.settle();
    expect(await sandbox.store.listSnapshotDeltas()).toEqual([]);
    expect(await w.layersOf(step.record.imageId), 'one layer over the previous snapshot image').toBe(uploadLayers + 1);
    const tagged = ((await sandbox.docker.getImage(step.record.imageId).inspect()) as { RepoTags: string[] }).RepoTags;
    expect(tagged).toContain(`berth-snapshot:${step.record.id}`);
    const restored = await w.plan.restore(runId, w.session, w.env, step.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind !== 'ok') return;
    expect(await w.run(restored.lease, LISTING)).toBe(before);
    // The restored sandbox goes on: its next small change is a layer over the loaded image.
    await w.run(restored.lease, 'echo again > src/0/f0.c');
    const next = await w.snap(restored.lease, 'step:1');
    expect(w.counts.commits).toBe(1);
    await w.snapshots.images.settle();
    expect(await w.layersOf(next.record.imageId)).toBe(uploadLayers + 2);
  });

  test('a host that stopped before the engine loaded two delta images restores from the newer: the store holds both layers and the engine loads the chain on demand', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_delta_crash';
    const w = world(sandbox, runId, onTestFinished, { load: false });
    const lease = await w.start();
    await w.run(lease, 'mkdir src && for f in $(seq 0 49); do echo $f > src/f$f; done');
    await settle();
    await w.snap(lease, 'upload');
    await w.run(lease, 'echo one > src/f1 && rm src/f2');
    const one = await w.snap(lease, 'step:0');
    await w.run(lease, 'echo two > src/f3 && mkdir src/sub && echo s > src/sub/s');
    const two = await w.snap(lease, 'step:1');
    await w.snapshots.images.settle();
    expect(w.counts.commits).toBe(1);
    expect((await sandbox.store.listSnapshotDeltas()).map((d) => d.imageId)).toEqual([one.record.imageId, two.record.imageId]);
    expect(await w.real.imageExists(two.record.imageId), 'the engine never loaded it').toBe(false);
    const before = await w.run(lease, LISTING);
    // The old sandbox is gone with its host; a restarted host knows nothing but the store.
    await lease.release();
    const restarted = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots: new Snapshotter({ engine: w.real, store: sandbox.store, logger: sandbox.logger }), clock: systemClock, logger: sandbox.logger });
    expect((await restarted.restorable(runId)).map((s) => s.id), 'a snapshot kept in the store counts as restorable').toContain(two.record.id);
    try {
      const restored = await restarted.restore(runId, w.session, w.env, two.record.id, signal());
      expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
      if (restored.kind !== 'ok') return;
      expect(await w.run(restored.lease, LISTING)).toBe(before);
      expect(await sandbox.store.listSnapshotDeltas(), 'both layers moved into the engine').toEqual([]);
      expect(await w.real.imageExists(one.record.imageId)).toBe(true);
    } finally {
      await restarted.finish(runId);
    }
  });

  test('a change a layer cannot stand for is committed by the engine: a file outside the workspace, a hard link, a fifo, more than the delta bound, a time the tar header cannot hold', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_delta_refused';
    const w = world(sandbox, runId, onTestFinished, { deltaMaxBytes: 64 * 1024 });
    const lease = await w.start();
    await w.run(lease, 'echo a > a');
    await settle();
    await w.snap(lease, 'upload');
    const cases: Array<[string, string, boolean]> = [
      ['a small change', 'echo b > b', false],
      ['a file outside the workspace', 'echo tool > /tmp/tool && echo c > c', true],
      ['a hard link', 'ln b hard', true],
      ['a fifo', 'mkfifo pipe', true],
      ['more than the bound', 'head -c 100000 /dev/zero > big', true],
      ['a small change again', 'echo d > d', false],
      // A time the tar writer cannot hold: a layer dated 2100 was refused by the engine (invalid tar
      // header). A file dated in the future stays "recent" to every later scan, so it is last here.
      ['a time after 2038', 'echo late > late && touch -d @4102444800 late', true],
    ];
    let last = '';
    for (const [what, script, committed] of cases) {
      const commits = w.counts.commits;
      await w.run(lease, script);
      await settle();
      const s = await w.snap(lease, `step:${what}`);
      expect(w.counts.commits - commits, what).toBe(committed ? 1 : 0);
      last = s.record.id;
    }
    const before = await w.run(lease, LISTING);
    const restored = await w.plan.restore(runId, w.session, w.env, last, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind !== 'ok') return;
    expect(await w.run(restored.lease, LISTING)).toBe(before);
    expect(await w.run(restored.lease, 'cat /tmp/tool && stat -c %h hard b')).toBe('tool\n2\n2\n');
  });

  test('a step that left only empty directories outside the workspace (a compiler\'s /tmp once its temporary files are gone) is a delta layer, and a restore has them empty with their mode, owner and time, even where a layer below held files', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_delta_outside_dirs';
    const w = world(sandbox, runId, onTestFinished);
    const lease = await w.start();
    await w.run(lease, 'echo a > a');
    await settle();
    await w.snap(lease, 'upload');
    const root = async (l: Lease, script: string) => {
      const r = await l.exec(['sh', '-c', script], { user: '0:0' });
      expect(r.exitCode, r.stderr).toBe(0);
      return r.stdout;
    };
    // A file outside: the engine commits it, so the next image holds /keep/k in a layer below.
    await root(lease, 'mkdir /keep && echo k > /keep/k');
    await w.run(lease, 'echo b > b');
    await settle();
    await w.snap(lease, 'step:0');
    const commits = w.counts.commits;
    // What gcc does: temporary files in /tmp, removed when it ends; and what a clean step does: empty a directory.
    await w.run(lease, 'for i in 1 2 3; do echo tmp > /tmp/cc$i.s; done; rm /tmp/cc*.s; echo c > c');
    await root(lease, 'rm /keep/k && mkdir /made && chmod 701 /made');
    const outside = 'stat -c "%n %F %a %u:%g %Y" /tmp /keep /made && ls -A /tmp /keep /made';
    // Files older than the file clock's margin before the snapshot reads them.
    await settle();
    const wanted = await root(lease, outside);
    const s = await w.snap(lease, 'step:1');
    expect(w.counts.commits - commits, 'no engine commit: only empty directories changed outside the workspace').toBe(0);
    await w.snapshots.images.settle();
    const before = await w.run(lease, LISTING);
    const restored = await w.plan.restore(runId, w.session, w.env, s.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind !== 'ok') return;
    expect(await w.run(restored.lease, LISTING)).toBe(before);
    expect(await root(restored.lease, outside), 'the emptied directory stays empty over the layer that held its file').toBe(wanted);
    // A file left outside is still the engine's to commit.
    await w.run(restored.lease, 'echo left > /tmp/left && echo d > d');
    await settle();
    await w.snap(restored.lease, 'step:2');
    expect(w.counts.commits - commits).toBe(1);
  });

  test('gc loads the layers a stopped host left that a record names, parents first, and deletes one whose record never committed', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_delta_gc';
    const w = world(sandbox, runId, onTestFinished, { load: false });
    const lease = await w.start();
    await w.run(lease, 'echo a > a');
    await settle();
    await w.snap(lease, 'upload');
    await w.run(lease, 'echo b > b');
    const kept = await w.snap(lease, 'step:0');
    await w.run(lease, 'echo c > c');
    // Taken, but the host died before its record committed.
    const lost = await w.plan.snapshot(runId, w.session, w.env, lease, 'step:1', null, signal());
    w.tags.push(lost.record.id);
    await w.snapshots.images.settle();
    expect((await sandbox.store.listSnapshotDeltas()).map((d) => d.imageId)).toEqual([kept.record.imageId, lost.record.imageId]);
    const images = new Snapshotter({ engine: w.real, store: sandbox.store, logger: sandbox.logger }).images;
    const young = await settleSnapshotDeltas({ store: sandbox.store, images, clock: systemClock, logger: sandbox.logger }, { graceMs: 60_000 });
    expect(young, 'within the grace period nothing is touched').toEqual({ loaded: [], dropped: [] });
    const done = await settleSnapshotDeltas({ store: sandbox.store, images, clock: systemClock, logger: sandbox.logger }, { graceMs: 0 });
    expect(done).toEqual({ loaded: [kept.record.imageId], dropped: [lost.record.imageId] });
    expect(await sandbox.store.listSnapshotDeltas()).toEqual([]);
    expect(await w.real.imageExists(kept.record.imageId)).toBe(true);
    expect(await w.real.imageExists(lost.record.imageId)).toBe(false);
  });

  test('a workspace file named .wh.X is refused at the snapshot, naming it: a layer reads that name as the removal of X, so no image could keep it', async ({ sandbox, onTestFinished }) => {
    const runId = 'run_delta_wh';
    const w = world(sandbox, runId, onTestFinished);
    const lease = await w.start();
    await w.run(lease, 'echo a > a');
    await settle();
    await w.snap(lease, 'upload');
    await w.run(lease, 'mkdir -p sub && echo w > sub/.wh.a');
    const err = await w.plan.snapshot(runId, w.session, w.env, lease, 'step:0', null, signal()).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'snapshot_unrepresentable' });
    expect(String((err as Error).message)).toContain('./sub/.wh.a');
    expect(await sandbox.store.listSnapshotDeltas(), 'nothing kept for it').toEqual([]);
  });
});
