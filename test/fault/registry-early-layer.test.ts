import { createHash } from 'node:crypto';
import type Dockerode from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { pullImage, registryEngine } from '../../host/sandbox/registry';
import { SnapshotTransport } from '../../host/snapshot';
import { engineLayerTar } from '../../host/snapshot/registry/engine-layer-tar';
import { openSqliteStore, type Store } from '../../host/store';
import { requireEngine, requireTinyImage, TINY_IMAGE } from '../support/docker-engine';
import { lastJson, planFixture } from '../support/plan-fixture';
import { startRegistry, type TestRegistry } from '../support/registry';
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

describe('a sync push\'s layer written on the host while the engine commits', { timeout: 600_000 }, () => {
  it('the tar written from a container\'s upper directory is the engine\'s commit layer byte for byte: files, an empty and a setuid file, nested directories, a symlink, a hard link, removed image files as whiteouts (which share one inode)', async () => {
    const { upper, diffId } = await changed(
      'mkdir -p /workspace/d/e && head -c 1048577 /dev/urandom > /workspace/big && : > /workspace/empty && echo hi > /workspace/d/e/x && ' +
        'cp /bin/busybox /workspace/su && chmod 4755 /workspace/su && ln -s d/e/x /workspace/link && ln /workspace/empty /workspace/hard && rm /bin/false /bin/expr && mkdir -p /tmp/t && echo t > /tmp/t/f',
    );
    expect(await digestOf(upper)).toBe(diffId);
  });

  it('a layer whose difference the host cannot see (a directory made anew over the image\'s: opaque) comes out as other bytes; its early upload is dropped and the push sends the engine\'s layer, which engine B pulls with the same image id', async () => {
    const t = new SnapshotTransport({ registry: registryEngine(docker), store: await tempStore(), logger: pino({ level: 'silent' }), pushWaitMs: 20_000 });
    const target = { registry: registry.address, policy: 'sync' as const };
    // A first push teaches the transport the registry's scheme (an early upload streams on a known one only).
    const warm = await changed('mkdir -p /workspace && echo warm > /workspace/w');
    await t.push(target, 'snap_early_warm', warm.image);
    const c = await docker.createContainer({ Image: TINY_IMAGE, Cmd: ['sh', '-c', 'rm -rf /usr && mkdir /usr && echo y > /usr/y && sleep 600'], Labels: { [LABEL]: '1' } });
    containers.push(c);
    await c.start();
    const upper = ((await c.inspect()).GraphDriver.Data as unknown as { UpperDir: string }).UpperDir;
    for (let i = 0; i < 600 && !existsSync(`${upper}/usr/y`); i++) await new Promise((r) => setTimeout(r, 100));
    const early = t.earlyLayer(target)!;
    expect(early).toBeDefined();
    early.start(upper);
    const { Id } = (await c.commit({ changes: [`LABEL ${LABEL}=1`] })) as { Id: string };
    images.push(Id);
    const diffId = (await docker.getImage(Id).inspect()).RootFS!.Layers!.at(-1)!;
    expect(await digestOf(upper)).not.toBe(diffId);
    const pushed = await t.push(target, 'snap_early_opaque', Id, undefined, { early });
    early.dispose();
    const m = (await (await fetch(`http://${registry.address}/v2/berth-snapshot/manifests/${pushed.registryRef.split('@')[1]}`, { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } })).json()) as { layers: Array<{ digest: string }> };
    expect(m.layers.at(-1)!.digest).toBe(diffId);
    expect(await pullImage(engineB.docker, pushed.registryRef, Id)).toBe('pulled');
    expect((await engineB.docker.getImage(Id).inspect()).Id).toBe(Id);
  });

  it('a host SIGKILLed with a step\'s layer half uploaded during its commit resumes on engine B from the registry: the run completes, each step\'s output once, every snapshot pushed', async () => {
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
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address, BERTH_FAULT: 'snapshot.push.early#2' });
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
