import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import pino from 'pino';
import { pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pullImage, registryEngine } from '../../host/sandbox/registry';
import { SnapshotTransport } from '../../host/snapshot';
import { openSqliteStore, type Store } from '../../host/store';
import { requireEngine, requireTinyImage, TINY_IMAGE } from '../support/docker-engine';
import { startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';

const RAW = 'application/vnd.docker.image.rootfs.diff.tar';
const LABEL = 'berth.test.direct-push';

let docker: Dockerode;
let registry: TestRegistry;
let engineB: SecondEngine;
let store: Store;
let dir: string;
const images: string[] = [];
const containers: Dockerode.Container[] = [];

beforeAll(async () => {
  docker = await requireEngine();
  await requireTinyImage(docker);
  registry = await startRegistry();
  engineB = await startSecondEngine('d');
  dir = mkdtempSync(join(tmpdir(), 'berth-direct-push-'));
  store = openSqliteStore(join(dir, 'berth.db'));
}, 120_000);
afterAll(async () => {
  for (const c of containers) await c.remove({ force: true }).catch(() => {});
  for (const i of images) await docker.getImage(i).remove({ force: true }).catch(() => {});
  await store?.close();
  await engineB?.stop();
  await registry?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 120_000);

async function exec(c: Dockerode.Container, cmd: string): Promise<void> {
  const e = await c.exec({ Cmd: ['sh', '-c', cmd] });
  const s = (await e.start({})) as NodeJS.ReadableStream;
  await new Promise((r) => (s.on('end', r), s.resume()));
  // The stream can end before the engine has recorded the exit.
  let code: number | null = null;
  for (let i = 0; i < 200 && (code = (await e.inspect()).ExitCode) === null; i++) await new Promise((r) => setTimeout(r, 50));
  expect(code).toBe(0);
}

/** A container on the main engine whose commits stand in for snapshots (1 MB of random bytes each). */
async function sandbox(): Promise<Dockerode.Container> {
  const c = await docker.createContainer({ Image: TINY_IMAGE, Cmd: ['sleep', '600'], Labels: { [LABEL]: '1' } });
  containers.push(c);
  await c.start();
  return c;
}

async function commit(c: Dockerode.Container, file: string): Promise<string> {
  await exec(c, `head -c 1048576 /dev/urandom > /tmp/${file}`);
  const { Id } = (await c.commit({ changes: [`LABEL ${LABEL}=1`] })) as { Id: string };
  images.push(Id);
  return Id;
}

async function manifest(ref: string): Promise<{ layers: Array<{ mediaType: string; digest: string }> }> {
  const digest = ref.slice(ref.indexOf('@') + 1);
  const r = await fetch(`http://${registry.address}/v2/berth-snapshot/manifests/${digest}`, { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
  expect(r.status).toBe(200);
  return (await r.json()) as { layers: Array<{ mediaType: string; digest: string }> };
}

const transport = (o: { direct?: boolean } = {}) => new SnapshotTransport({ registry: registryEngine(docker), store, logger: pino({ level: 'silent' }), pushWaitMs: 20_000, ...o });
const target = () => ({ registry: registry.address, policy: 'sync' as const });

describe('snapshot pushes straight to the registry', { timeout: 300_000 }, () => {
  it('a snapshot committed on this engine is pushed by the host itself, only its new layer sent, and another engine pulls it with the same image id', async () => {
    const c = await sandbox();
    const t = transport();
    const first = await commit(c, 'one');
    const a = await t.push(target(), 'snap_direct_1', first);
    const second = await commit(c, 'two');
    const b = await t.push(target(), 'snap_direct_2', second);
    const ma = await manifest(a.registryRef);
    const mb = await manifest(b.registryRef);
    // The snapshot's own layer went up uncompressed under its diff id (the host's push, not the engine's gzip).
    const diffIds = (await docker.getImage(second).inspect()).RootFS!.Layers!;
    expect(mb.layers.at(-1)).toMatchObject({ mediaType: RAW, digest: diffIds.at(-1) });
    // The second push reused the first one's blobs below its own layer (a commit holds the container's whole upper layer).
    expect(mb.layers.slice(0, -1)).toEqual(ma.layers.slice(0, -1));
    expect(mb.layers.at(-1)!.digest).not.toBe(ma.layers.at(-1)!.digest);
    expect(await pullImage(engineB.docker, b.registryRef, second)).toBe('pulled');
    expect((await engineB.docker.getImage(second).inspect()).Id).toBe(second);
  });

  it('a snapshot kept in the store as a layer is pushed from there without loading it into the engine, and restores elsewhere by its id', async () => {
    const c = await sandbox();
    const parent = await commit(c, 'base');
    const t = transport();
    await t.push(target(), 'snap_delta_parent', parent);
    // A delta image as the snapshotter writes one: the parent's config plus one layer built on the host.
    const p = pack();
    p.entry({ name: 'workspace/', type: 'directory', mode: 0o755, mtime: new Date(0) });
    p.entry({ name: 'workspace/delta.txt', mode: 0o644, mtime: new Date(0) }, 'made on the host\n');
    p.finalize();
    const chunks: Buffer[] = [];
    for await (const ch of p) chunks.push(ch as Buffer);
    const layer = Buffer.concat(chunks);
    const cfg = (await docker.getImage(parent).inspect()) as unknown as { Id: string };
    expect(cfg.Id).toBe(parent);
    const parentConfig = await registryEngine(docker).localImage(parent, 0);
    const json = JSON.parse(parentConfig!.config.toString('utf8')) as { rootfs: { diff_ids: string[] }; history?: unknown[] };
    json.rootfs.diff_ids.push(`sha256:${createHash('sha256').update(layer).digest('hex')}`);
    json.history = [...(json.history ?? []), { created: new Date(0).toISOString(), created_by: 'berth delta (test)' }];
    const config = Buffer.from(JSON.stringify(json));
    const imageId = `sha256:${createHash('sha256').update(config).digest('hex')}`;
    await store.putSnapshotDelta({ imageId, parentImageId: parent, snapshotId: 'snap_delta', config, layer, createdAt: Date.now() });
    let loaded = 0;
    const pushed = await t.push(target(), 'snap_delta', imageId, undefined, { materialize: async () => loaded++ });
    expect(loaded).toBe(0);
    await expect(docker.getImage(imageId).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(await pullImage(engineB.docker, pushed.registryRef, imageId)).toBe('pulled');
    const made = await engineB.docker.createContainer({ Image: imageId, Cmd: ['cat', '/workspace/delta.txt'] });
    try {
      await made.start();
      await made.wait();
      const out = (await made.logs({ stdout: true })).toString('utf8');
      expect(out).toContain('made on the host');
    } finally {
      await made.remove({ force: true });
    }
  });

  it('a registry that lost a blob this host thought it had still gets the whole snapshot: the push goes through the engine', async () => {
    const c = await sandbox();
    const t = transport();
    const first = await commit(c, 'lost');
    const a = await t.push(target(), 'snap_lost_1', first);
    // The base image's layer vanishes behind the registry's back; the next snapshot sits on it.
    registry.deleteBlob((await manifest(a.registryRef)).layers[0]!.digest);
    const second = await commit(c, 'after');
    const b = await t.push(target(), 'snap_lost_2', second);
    expect(await pullImage(engineB.docker, b.registryRef, second)).toBe('pulled');
  });

  it('with the direct push turned off every snapshot goes through the engine and restores the same way', async () => {
    const c = await sandbox();
    const img = await commit(c, 'engine');
    const pushed = await transport({ direct: false }).push(target(), 'snap_engine', img);
    expect((await manifest(pushed.registryRef)).layers.at(-1)!.mediaType).not.toBe(RAW);
    expect(await pullImage(engineB.docker, pushed.registryRef, img)).toBe('pulled');
  });
});
