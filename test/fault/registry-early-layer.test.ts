import { createHash } from 'node:crypto';
import type Dockerode from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pino from 'pino';
import { pullImage, registryEngine } from '../../host/sandbox/registry';
import { SnapshotTransport } from '../../host/snapshot';
import { engineLayerTar } from '../../host/snapshot/registry/engine-layer-tar';
import { openSqliteStore, type Store } from '../../host/store';
import { requireEngine, requireTinyImage, TINY_IMAGE } from '../support/docker-engine';
import { lastJson, planFixture } from '../support/plan-fixture';
import { manifestLayers, startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';

// A `sync` push uploads a commit's layer while the engine is still committing it: the host writes
// the tar the engine will write, from the container's upper directory. These show that tar is the
// engine's byte for byte where it is predicted, that what cannot be predicted says so, and that a
// host killed with such an upload half sent loses nothing: the run completes from the registry.

const LABEL = 'berth.test.early-layer';
let docker: Dockerode;
let registry: TestRegistry;
let engineB: SecondEngine;
const containers: Dockerode.Container[] = [];
const stores: Store[] = [];
async function tempStore(): Promise<Store> {
  const s = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'berth-early-')), 'berth.db'));
  stores.push(s);
  return s;
}
const images: string[] = [];
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;

beforeAll(async () => {
  docker = await requireEngine();
  await requireTinyImage(docker);
  registry = await startRegistry();
  engineB = await startSecondEngine('e');
}, 120_000);
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 120_000);
afterAll(async () => {
  for (const c of containers) await c.remove({ force: true }).catch(() => {});
  for (const i of images) await docker.getImage(i).remove({ force: true }).catch(() => {});
  for (const s of stores) await s.close();
  await engineB?.stop();
  await registry?.stop();
}, 120_000);

/** A container that ran `script` and now only sleeps; its upper directory and the diff id of a commit of it. */
async function changed(script: string): Promise<{ upper: string; diffId: string; image: string }> {
  const c = await docker.createContainer({ Image: TINY_IMAGE, Cmd: ['sh', '-c', `${script} && touch /tmp/.ready && sleep 600`], Labels: { [LABEL]: '1' } });
  containers.push(c);
  await c.start();
  const upper = ((await c.inspect()).GraphDriver.Data as unknown as { UpperDir: string }).UpperDir;
  for (let i = 0; i < 600; i++) {
    const e = await c.exec({ Cmd: ['test', '-e', '/tmp/.ready'] });
    await new Promise((r) => (e.start({}) as Promise<NodeJS.ReadableStream>).then((s) => (s.on('end', r), s.resume())));
    if ((await e.inspect()).ExitCode === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const { Id } = (await c.commit({ changes: [`LABEL ${LABEL}=1`] })) as { Id: string };
  images.push(Id);
  return { upper, diffId: (await docker.getImage(Id).inspect()).RootFS!.Layers!.at(-1)!, image: Id };
}

async function digestOf(upper: string): Promise<string> {
  const h = createHash('sha256');
  for await (const b of engineLayerTar(upper, { maxBytes: 8 << 20 })) h.update(b);
  return `sha256:${h.digest('hex')}`;
}

/** The registry's answer to a HEAD of a blob in the snapshot repository: 200 there, 404 not. */
async function blobStatus(digest: string): Promise<number> {
  return (await fetch(`http://${registry.address}/v2/berth-snapshot/blobs/${digest}`, { method: 'HEAD' })).status;
}

/** Waits (bounded) for a blob to be complete in the registry; its status at the end. */
async function blobAppears(digest: string): Promise<number> {
  for (let i = 0; i < 600; i++) {
    const s = await blobStatus(digest);
    if (s === 200) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  return blobStatus(digest);
}

/** A container that ran `script` and sleeps, not committed yet: its upper directory, once `ready` exists in it. */
async function running(script: string, ready: string): Promise<{ c: Dockerode.Container; upper: string }> {
  const c = await docker.createContainer({ Image: TINY_IMAGE, Cmd: ['sh', '-c', `${script} && sleep 600`], Labels: { [LABEL]: '1' } });
  containers.push(c);
  await c.start();
  const upper = ((await c.inspect()).GraphDriver.Data as unknown as { UpperDir: string }).UpperDir;
  for (let i = 0; i < 600 && !existsSync(`${upper}/${ready}`); i++) await new Promise((r) => setTimeout(r, 100));
  return { c, upper };
}

/** Every registry request this process makes while `f` runs (method and URL). */
async function requestsDuring<T>(f: () => Promise<T>): Promise<{ value: T; requests: string[] }> {
  const real = globalThis.fetch;
  const requests: string[] = [];
  globalThis.fetch = ((url: string | URL, init?: RequestInit) => (requests.push(`${init?.method ?? 'GET'} ${String(url)}`), real(url, init))) as typeof fetch;
  try {
    return { value: await f(), requests };
  } finally {
    globalThis.fetch = real;
  }
}

describe('a sync push\'s layer written on the host while the engine commits', { timeout: 600_000 }, () => {
  it('the tar written from a container\'s upper directory is the engine\'s commit layer byte for byte: files, an empty and a setuid file, nested directories, a symlink, a hard link, removed image files as whiteouts (which share one inode)', async () => {
    const { upper, diffId } = await changed(
      'mkdir -p /workspace/d/e && head -c 1048577 /dev/urandom > /workspace/big && : > /workspace/empty && echo hi > /workspace/d/e/x && ' +
        'cp /bin/busybox /workspace/su && chmod 4755 /workspace/su && ln -s d/e/x /workspace/link && ln /workspace/empty /workspace/hard && rm /bin/false /bin/expr && mkdir -p /tmp/t && echo t > /tmp/t/f',
    );
    expect(await digestOf(upper)).toBe(diffId);
  });

  it('the early upload completes the layer\'s blob under the host\'s hash before the commit names its diff id, so the push after the commit sends nothing for that layer; engine B pulls the snapshot with the same image id', async () => {
    const t = new SnapshotTransport({ registry: registryEngine(docker), store: await tempStore(), logger: pino({ level: 'silent' }), pushWaitMs: 20_000 });
    const target = { registry: registry.address, policy: 'sync' as const };
    const warm = await changed('mkdir -p /workspace && echo warm2 > /workspace/w');
    await t.push(target, 'snap_early_warm2', warm.image);
    const { c, upper } = await running('mkdir -p /workspace && head -c 300000 /dev/urandom > /workspace/r && touch /workspace/.ready', 'workspace/.ready');
    const guess = await digestOf(upper);
    const early = t.earlyLayer(target)!;
    early.start(upper);
    // Complete in the registry with no commit made yet: nothing but the host's own hash named it.
    expect(await blobAppears(guess)).toBe(200);
    const { Id } = (await c.commit({ changes: [`LABEL ${LABEL}=1`] })) as { Id: string };
    images.push(Id);
    const diffId = (await docker.getImage(Id).inspect()).RootFS!.Layers!.at(-1)!;
    expect(diffId).toBe(guess);
    const { value: pushed, requests } = await requestsDuring(() => t.push(target, 'snap_early_done', Id, undefined, { early }));
    early.dispose();
    expect(requests.filter((r) => r.includes(encodeURIComponent(diffId)) || r.includes(diffId) || r.startsWith('PATCH'))).toEqual([]);
    expect((await manifestLayers(registry.address, 'berth-snapshot', pushed.registryRef.split('@')[1]!)).at(-1)).toBe(diffId);
    expect(await pullImage(engineB.docker, pushed.registryRef, Id)).toBe('pulled');
    expect((await engineB.docker.getImage(Id).inspect()).Id).toBe(Id);
  });

  it('a layer whose difference the host cannot see (a directory made anew over the image\'s: opaque) comes out as other bytes: the manifest names the engine\'s layer, which engine B pulls with the same image id; the blob of the wrong guess is named by no manifest and the registry\'s garbage collection removes it, the snapshot still pulling after', async () => {
    const t = new SnapshotTransport({ registry: registryEngine(docker), store: await tempStore(), logger: pino({ level: 'silent' }), pushWaitMs: 20_000 });
    const target = { registry: registry.address, policy: 'sync' as const };
    // A first push teaches the transport the registry's scheme (an early upload streams on a known one only).
    const warm = await changed('mkdir -p /workspace && echo warm > /workspace/w');
    await t.push(target, 'snap_early_warm', warm.image);
    const { c, upper } = await running('rm -rf /usr && mkdir /usr && echo y > /usr/y', 'usr/y');
    const early = t.earlyLayer(target)!;
    expect(early).toBeDefined();
    early.start(upper);
    const { Id } = (await c.commit({ changes: [`LABEL ${LABEL}=1`] })) as { Id: string };
    images.push(Id);
    const diffId = (await docker.getImage(Id).inspect()).RootFS!.Layers!.at(-1)!;
    const guess = await digestOf(upper);
    expect(guess).not.toBe(diffId);
    const pushed = await t.push(target, 'snap_early_opaque', Id, undefined, { early });
    early.dispose();
    const layers = await manifestLayers(registry.address, 'berth-snapshot', pushed.registryRef.split('@')[1]!);
    expect(layers.at(-1)).toBe(diffId);
    // The wrong guess: complete in the registry, named by no manifest.
    expect(await blobStatus(guess)).toBe(200);
    for (const tag of ['snap_early_warm', 'snap_early_warm2', 'snap_early_done', 'snap_early_opaque']) expect(await manifestLayers(registry.address, 'berth-snapshot', tag).catch(() => [])).not.toContain(guess);
    // The registry's garbage collection (stopped meanwhile, as its operators run it) removes it and keeps what manifests name.
    await registry.down();
    execFileSync('docker-registry', ['garbage-collect', join(dirname(registry.storage), 'config.yml')], { stdio: 'ignore' });
    await registry.up();
    expect(await blobStatus(guess)).toBe(404);
    expect(await blobStatus(diffId)).toBe(200);
    expect(await pullImage(engineB.docker, pushed.registryRef, Id)).toBe('pulled');
    expect((await engineB.docker.getImage(Id).inspect()).Id).toBe(Id);
  });

  it.each([
    ['half uploaded', 'snapshot.push.early#2'],
    ['complete under the host\'s hash, no manifest yet', 'snapshot.push.early_done#2'],
  ])('a host SIGKILLed with a step\'s layer %s during its commit resumes on engine B from the registry: the run completes, each step\'s output once, every snapshot pushed', async (_, fault) => {
    // 2 MB per step: over the size a host-built delta takes, so each snapshot is an engine commit.
    const steps = ['one', 'two', 'three'].map((name) => ({ name, run: `yes ${name} | head -c 2097152 > ${name}.bin && echo ${name} >> steps.log` }));
    // The uninterrupted twin (no registry, main engine): the digest the resumed run must end with.
    fx = await planFixture(steps);
    const twin = await fx.cli(['run', fx.plan, '--json'], {});
    expect(twin.code, twin.stderr).toBe(0);
    const expected = await fx.read(async (s) => (await s.listSnapshots({})).at(-1)!.workspaceDigest);
    await fx.cleanup();
    fx = await planFixture(steps);
    // The second snapshot's layer goes up early (as every commit's does once this host has talked to the registry), and the host dies there.
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address, BERTH_FAULT: fault });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    fx.allowLeftovers('engine A (the main engine) keeps the killed host\'s container; the run moved to engine B');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const before = await fx.read((s) => s.listSnapshots({ runId }));
    expect(before.length).toBe(1);
    const end = await fx.cli(['resume', runId, '--json'], { DOCKER_HOST: engineB.dockerHost, BERTH_REGISTRY: registry.address });
    expect(end.code, end.stderr).toBe(0);
    expect(lastJson<{ run: Run }>(end).run.state).toBe('completed');
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    expect(snaps.length).toBeGreaterThanOrEqual(3);
    expect(snaps.every((s) => s.registryRef !== null)).toBe(true);
    // steps.log is in the digest: a step that ran twice in the final workspace would differ from the twin.
    expect(snaps.at(-1)!.workspaceDigest).toBe(expected);
  });
});
