import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnvironment, type Environment } from '../../environment';
import { isBerthError } from '../../host/errors';
import { RunSandbox } from '../../host/run-sandbox';
import { snapshotEngine, type Lease } from '../../host/sandbox';
import { checkSnapshotSecrets } from '../../host/secrets';
import { Snapshotter, type SnapshotEngine } from '../../host/snapshot';
import { systemClock } from '../../host/support/clock';
import { exchangeRacer } from '../support/exchange-racer';
import { watchOpens } from '../support/open-watch';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

const signal = () => AbortSignal.timeout(300_000);
const rchar = () => Number(/rchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
const settle = () => new Promise((r) => setTimeout(r, 200));

/** A plan-run sandbox world on the real engine, counting `docker commit`s. */
function world(sandbox: SandboxWorld, runId: string, onTestFinished: (fn: () => Promise<void>) => void, extra = '') {
  const env: Environment = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\n${extra}`, 'env.yaml');
  const real = snapshotEngine(sandbox.docker);
  const counts = { commits: 0 };
  const engine: SnapshotEngine = {
    ...real,
    commit: (id, opts) => {
      counts.commits += 1;
      return real.commit(id, opts);
    },
  };
  const snapshots = new Snapshotter({ engine, store: sandbox.store, logger: sandbox.logger });
  const plan = new RunSandbox({ store: sandbox.store, sandbox: sandbox.host, snapshots, clock: systemClock, logger: sandbox.logger });
  const tags: string[] = [];
  const leases: Lease[] = [];
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
  const run = async (lease: Lease, script: string, o: { stdin?: Buffer } = {}) => {
    const r = await lease.exec(['sh', '-c', `cd /workspace && ${script}`], o.stdin ? { stdin: o.stdin } : {});
    expect(r.exitCode, r.stderr).toBe(0);
    return r.stdout;
  };
  const start = async () => {
    await sandbox.store.commit({ sessionId: session, label: 'seed', createSession: {} });
    const lease = await plan.leaseFresh(runId, session, env, signal());
    leases.push(lease);
    return lease;
  };
  const paused = async (lease: Lease) => ((await sandbox.docker.getContainer(lease.containerId).inspect()) as { State: { Paused: boolean } }).State.Paused;
  return { env, real, counts, snapshots, plan, session, snap, run, start, paused };
}

const LISTING = "cd /workspace && find . | sort | while read -r p; do stat -c '%n %F %a' \"$p\" | od -An -c | tr -s ' '; done";

describe('host-side reading of a hostile sandbox', { timeout: 300_000 }, () => {
  test('a step that swaps a workspace directory for a symlink to / while snapshots read it never makes the host open a root-only file or a FIFO, and leaves no container paused', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_racer', onTestFinished);
    const host = mkdtempSync('/tmp/berth-hostile-');
    onTestFinished(async () => {
      execFileSync('rm', ['-rf', host]);
    });
    writeFileSync(join(host, 'marker'), 'root only');
    chmodSync(join(host, 'marker'), 0o600);
    execFileSync('mkfifo', [join(host, 'fifo')]);
    const lease = await w.start();
    await w.run(lease, 'cat > /tmp/racer && chmod 755 /tmp/racer', { stdin: exchangeRacer() });
    // The workspace mirrors the host's path under x/: when x is the link to /, x/<host path> is the host's file.
    const mirror = `x${host}`;
    await w.run(lease, `mkdir -p ${mirror}/pad && ln -s / xl && for i in $(seq 1 200); do echo $i > ${mirror}/pad/$i; done`);
    await settle();
    await w.snap(lease, 'upload');
    const watch = await watchOpens([join(host, 'marker'), join(host, 'fifo')]);
    for (let i = 0; i < 6; i++) {
      // Rewritten each time, so that every snapshot hashes them again.
      // The stopped racer may still be exiting under load: its last swap must be over before the fix-up.
      await w.run(lease, `i=0; while ps | grep -q "[/]tmp/racer" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ -L x ] && mv x t && mv xl x && mv t xl; echo ${i} > ${mirror}/marker && echo ${i} > ${mirror}/fifo && for f in $(seq 1 200); do echo ${i} > ${mirror}/pad/$f; done`);
      const stop = new AbortController();
      const racing = lease.exec(['sh', '-c', 'rm -f /tmp/racing && cd /workspace && exec /tmp/racer x xl /tmp/racing'], { signal: stop.signal }).catch(() => undefined);
      try {
        // The racer is swapping before the snapshot starts reading.
        for (let k = 0; k < 300 && (await lease.exec(['test', '-e', '/tmp/racing'])).exitCode !== 0; k++) await new Promise((r) => setTimeout(r, 100));
        await w.snap(lease, `step:${i}`).catch((err: unknown) => {
          // A snapshot may be refused while a writer never stops; it may never read the host.
          if (!isBerthError(err)) throw err;
        });
      } finally {
        stop.abort();
        await racing;
      }
      expect(await w.paused(lease), 'no container is left paused').toBe(false);
    }
    // The watch sees opens: the test's own read is the one event.
    readFileSync(join(host, 'marker'));
    await watch.waitFor(join(host, 'marker'));
    const events = await watch.stop();
    expect(events.filter((e) => e.includes('OPEN'))).toEqual([`${join(host, 'marker')} OPEN`]);
  });

  test('a 1 TB sparse file in a sandbox with a 2 TB disk limit fails the snapshot with a typed error naming the host\'s byte bound, never a host path, after the host read less than 1 MB', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_sparse', onTestFinished, 'resources: { diskMb: 2097152 }\n');
    const lease = await w.start();
    await w.run(lease, 'echo a > a');
    await settle();
    await w.snap(lease, 'upload');
    await w.run(lease, 'dd of=big bs=1 count=0 seek=1099511627776 2>/dev/null');
    const before = rchar();
    const err = await w.snap(lease, 'step:0').catch((e: unknown) => e);
    expect(rchar() - before).toBeLessThan(1 << 20);
    expect(isBerthError(err, 'snapshot_bound_exceeded'), String(err)).toBe(true);
    expect((err as Error).message).toContain('bytes bound');
    expect((err as Error).message).toContain('./big');
    expect((err as Error).message).not.toContain('/var/lib/docker');
    expect(await w.paused(lease)).toBe(false);
  });

  test('a tree 5,000 directories deep, which an image layer cannot keep, is refused by a typed error naming the path length bound, with no path too long and no host path', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_deep', onTestFinished);
    const lease = await w.start();
    // A tree as deep as a layer holds is kept, and restored with its digest verified.
    await w.run(lease, 'p=$(printf "/a%.0s" $(seq 1000)) && mkdir -p "b$p" && echo deep > "b$p/f"');
    const s = await w.snap(lease, 'step:0');
    expect(Object.keys((await sandbox.store.getWorkspaceManifest(s.record.imageId)) as object)).toHaveLength(1002);
    const restored = await w.plan.restore('run_deep', w.session, w.env, s.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind !== 'ok') return;
    // Five chains of 1,000 moved into each other: no path the shell uses is longer than PATH_MAX.
    await w.run(restored.lease, 'p=$(printf "/a%.0s" $(seq 999)) && mkdir -p "a$p" && echo deep > "a$p/f" && for i in 1 2 3 4; do mkdir -p "t$p" && mv a "t$p/a" && mv t a || exit 1; done');
    const err = await w.snap(restored.lease, 'step:1').catch((e: unknown) => e);
    expect(isBerthError(err, 'snapshot_bound_exceeded'), String(err)).toBe(true);
    expect((err as Error).message).toContain('path length bound');
    expect((err as Error).message).not.toContain('/var/lib/docker');
    expect((err as Error).message).not.toContain('ENAMETOOLONG');
  });

  test('12,000 empty directories and 6,000 links (9 MB of tar headers, past a 1 MB delta) are never built into a host-side layer: the delta is refused from its entry count and the engine commits, in bounded host memory', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_many', onTestFinished);
    const lease = await w.start();
    await w.run(lease, 'echo a > a');
    await settle();
    await w.snap(lease, 'upload');
    expect(w.counts.commits).toBe(1);
    await w.run(lease, 'mkdir m l && cd m && seq 12000 | xargs mkdir && cd ../l && seq 6000 | sed s/^/t/ | xargs sh -c \'ln -s "$@" .\' sh');
    const rss = process.memoryUsage().rss;
    let peak = rss;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    try {
      await w.snap(lease, 'step:0');
    } finally {
      clearInterval(sampler);
    }
    expect(w.counts.commits, 'committed by the engine, not built here').toBe(2);
    expect(peak - rss).toBeLessThan(300 << 20);
  });

  test('a name that is not UTF-8 survives a snapshot and a restore: in the manifest, the digest and the restored workspace', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_bytes', onTestFinished);
    const lease = await w.start();
    await w.run(lease, 'echo a > "a$(printf "\\377")" && mkdir "d$(printf "\\376")" && echo b > "d$(printf "\\376")/f" && ln -s "t$(printf "\\375")" link');
    await settle();
    const s = await w.snap(lease, 'upload');
    const m = (await sandbox.store.getWorkspaceManifest(s.record.imageId)) as Record<string, string>;
    expect(Object.keys(m).sort()).toEqual(['./a\udcff', './d\udcfe', './d\udcfe/f', './link'].sort());
    expect(m['./link']).toBe('l:t\udcfd');
    // A second step adds another such name: a layer written as text cannot carry it, so it is committed.
    await w.run(lease, 'echo c > "c$(printf "\\377")"');
    const next = await w.snap(lease, 'step:0');
    const before = await w.run(lease, LISTING);
    const restored = await w.plan.restore('run_bytes', w.session, w.env, next.record.id, signal());
    expect(restored.kind, restored.kind === 'reconcile' ? restored.reason : '').toBe('ok');
    if (restored.kind !== 'ok') return;
    expect(await w.run(restored.lease, LISTING)).toBe(before);
    expect(before).toContain('377');
  });

  test('a secret in a file name, a directory name or a symlink target refuses the snapshot naming where it is, with the value nowhere in the message', async ({ sandbox, onTestFinished }) => {
    const w = world(sandbox, 'run_names', onTestFinished);
    const lease = await w.start();
    const value = `sekret${Date.now().toString(36)}value`;
    const env = parseEnvironment(`kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${sandbox.imageId}" }\nsecrets:\n  - { name: TOKEN, from: { env: BERTH_NAME_TOKEN }, expose: env, to: [use], allowInWorkspace: true }\n`, 'env.yaml');
    const source = { env: (n: string) => (n === 'BERTH_NAME_TOKEN' ? value : undefined), file: async () => '' };
    for (const [script, place] of [
      [`echo x > "f-${value}"`, 'file name'],
      [`mkdir "d-${value}"`, 'directory name'],
      [`ln -s "/tmp/${value}" link`, 'symlink target'],
    ] as const) {
      await w.run(lease, `rm -rf ./* && ${script}`);
      const err = await checkSnapshotSecrets(lease, env.secrets, { source }).catch((e: unknown) => e);
      expect(isBerthError(err, 'snapshot_holds_secret'), `${place}: ${String(err)}`).toBe(true);
      expect((err as Error).message).toContain(`in its ${place}`);
      expect(JSON.stringify(err) + (err as Error).message).not.toContain(value);
    }
    // Content stays allowed when the secret says so (a name never is: it goes into every manifest).
    await w.run(lease, `rm -rf ./* && echo ${value} > plain`);
    expect(await checkSnapshotSecrets(lease, env.secrets, { source })).toEqual({ 'berth.secret-material': 'TOKEN' });
  });
});
