/**
 * digest parts (not a suite): host CPU of one writing call's workspace digest, by part, on a
 * 300-file workspace in a real container: the upper-layer walk, the merged-view refresh and hash
 * (scanLayer), the manifest digests and the changed-path list, and the whole `workspaceState`.
 * Between readings `date +%N > out.txt` runs in the container (not timed), as the agent bench's
 * writing call does. With BASE_DIR (a checkout, e.g. /work/main) its upper walk and whole
 * `workspaceState` run interleaved beside this tree's. `npx tsx bench/_digest-parts.ts [ROUNDS] [BASE_DIR]`
 */
import Dockerode from 'dockerode';
import pino from 'pino';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { snapshotEngine } from '../host/sandbox';
import { layerDirs } from '../host/sandbox/snapshot-image';
import { changedInUpper, scanLayer } from '../host/snapshot/layer-scan';
import { manifestDigest } from '../host/snapshot/manifest';
import { changedPaths } from '../host/snapshot/listing-compare';
import { Snapshotter } from '../host/snapshot/snapshotter';
import { openSqliteStore } from '../host/store';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 40);
const baseDir = process.argv[3];
const base = baseDir
  ? { walk: ((await import(`${baseDir}/host/snapshot/layer-scan.ts`)) as { changedInUpper: typeof changedInUpper }).changedInUpper, Snap: ((await import(`${baseDir}/host/snapshot/snapshotter.ts`)) as { Snapshotter: typeof Snapshotter }).Snapshotter }
  : undefined;
const docker = new Dockerode();
const dir = mkdtempSync(join(tmpdir(), 'berth-digest-parts-'));
const store = openSqliteStore(join(dir, 'x.db'));
const c = await docker.createContainer({ Image: 'berth/tiny', Cmd: ['sh', '-c', 'mkdir -p /workspace/src && cd /workspace && for i in $(seq 1 300); do echo $i > src/f$i; done; while :; do sleep 1000; done'], Labels: { 'berth.scratch': 'digest-parts' } });
await c.start();
const run = async (cmd: string) => {
  const ex = await c.exec({ Cmd: ['sh', '-c', cmd], WorkingDir: '/workspace', AttachStdout: true, AttachStderr: true });
  const s = await ex.start({ hijack: true, stdin: false });
  s.resume();
  await new Promise((r) => s.on('end', r));
};
const cpu = async <T>(fn: () => Promise<T> | T): Promise<[T, number]> => {
  const u = process.cpuUsage();
  const v = await fn();
  const d = process.cpuUsage(u);
  return [v, (d.user + d.system) / 1000];
};
try {
  await new Promise((r) => setTimeout(r, 1500));
  const dirs = (await layerDirs(docker, c.id))!;
  const snap = new Snapshotter({ engine: snapshotEngine(docker), store, logger: pino({ level: 'warn' }) });
  const t = { containerId: c.id, imageId: 'sha256:none', workspacePath: '/workspace', exec: async () => { throw new Error('no exec'); } } as never;
  await snap.workspaceState(t);
  const baseSnap = base ? new base.Snap({ engine: snapshotEngine(docker), store, logger: pino({ level: 'warn' }) }) : undefined;
  await baseSnap?.workspaceState(t);
  let prev = await scanLayer(dirs, '/workspace', null);
  const parts: Record<string, number[]> = {};
  const add = (k: string, v: number) => (parts[k] ??= []).push(v);
  for (let i = 0; i < ROUNDS; i++) {
    await run('date +%N > out.txt');
    const [, walk] = await cpu(() => changedInUpper(dirs, '/workspace', prev.startedAt - 25));
    add('upper walk (changedInUpper)', walk);
    if (base) add('BASE upper walk', (await cpu(() => base.walk(dirs, '/workspace', prev.startedAt - 25)))[1]);
    const [l, scan] = await cpu(() => scanLayer(dirs, '/workspace', { manifest: prev.manifest, since: prev.startedAt }));
    add('scanLayer (walk + refresh + hash)', scan);
    add('  ... of it: after the walk', scan - walk);
    const [, md] = await cpu(() => manifestDigest(l.manifest));
    add('manifestDigest (one)', md);
    const [, cp] = await cpu(() => changedPaths(prev.manifest, l.manifest));
    add('changedPaths', cp);
    prev = l;
    await run('date +%N > out.txt');
    const [, ws] = await cpu(() => snap.workspaceState(t));
    add('workspaceState (whole)', ws);
    if (baseSnap) {
      await run('date +%N > out.txt');
      add('BASE workspaceState (whole)', (await cpu(() => baseSnap.workspaceState(t)))[1]);
    }
  }
  for (const [k, v] of Object.entries(parts)) console.log(`${k.padEnd(36)} ${median(v).toFixed(3)} ms CPU`);
} finally {
  await c.remove({ force: true });
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
