import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directPush, readySessions, type ImageSource } from '../../host/snapshot/registry/direct-push';
import { RegistryHttp } from '../../host/snapshot/registry/registry-http';
import { startRegistry, type TestRegistry } from '../support/registry';

let registry: TestRegistry;
beforeAll(async () => {
  registry = await startRegistry();
}, 60_000);
afterAll(async () => {
  await registry?.stop();
});

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** An image of one layer (random bytes standing in for its tar), with a config naming it. */
function image(layer: Buffer, chunks: (layer: Buffer) => AsyncIterable<Buffer>, counts: { whole: number }): ImageSource {
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [sha(layer)] }, nonce: randomBytes(8).toString('hex') }));
  return {
    config,
    layers: [
      {
        diffId: sha(layer),
        size: layer.length,
        tar: async () => {
          counts.whole++;
          return layer;
        },
        chunks: () => chunks(layer),
      },
    ],
  };
}

async function* inPieces(b: Buffer): AsyncGenerator<Buffer> {
  for (let off = 0; off < b.length; off += 256 * 1024) yield b.subarray(off, off + 256 * 1024);
}

async function blob(digest: string): Promise<Buffer> {
  const r = await fetch(`http://${registry.address}/v2/berth-snapshot/blobs/${digest}`);
  expect(r.status).toBe(200);
  return Buffer.from(await r.arrayBuffer());
}

describe('a snapshot layer sent as it is read', { timeout: 120_000 }, () => {
  it('once upload sessions are open ahead, the layer goes up as it is read without ever being read whole, and the registry holds its exact bytes', async () => {
    const http = new RegistryHttp(registry.address);
    const counts = { whole: 0 };
    // The first push opens the pool of sessions (and learns the scheme); the second finds them ready.
    await directPush(http, 'berth-snapshot', 'warm', image(randomBytes(4096), inPieces, counts));
    await sessionsOpen(http);
    counts.whole = 0;
    const layer = randomBytes(3 * 1024 * 1024 + 17);
    const pushed = await directPush(http, 'berth-snapshot', 'streamed', image(layer, inPieces, counts));
    expect(pushed).toBeDefined();
    expect(counts.whole).toBe(0);
    expect((await blob(sha(layer))).equals(layer)).toBe(true);
  });

  it('a layer whose reading stops part way (a file changed under it) is read again whole and sent, and the manifest names exactly those bytes', async () => {
    const http = new RegistryHttp(registry.address);
    const counts = { whole: 0 };
    await directPush(http, 'berth-snapshot', 'warm2', image(randomBytes(4096), inPieces, { whole: 0 }));
    await sessionsOpen(http);
    const layer = randomBytes(2 * 1024 * 1024);
    const broken = async function* (b: Buffer) {
      yield b.subarray(0, 1024 * 1024);
      throw new Error('file shorter than recorded');
    };
    const pushed = await directPush(http, 'berth-snapshot', 'broken', image(layer, broken, counts));
    expect(pushed).toBeDefined();
    expect(counts.whole).toBe(1);
    const m = (await (await fetch(`http://${registry.address}/v2/berth-snapshot/manifests/broken`, { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } })).json()) as { layers: Array<{ digest: string; size: number }> };
    expect(m.layers[0]).toMatchObject({ digest: sha(layer), size: layer.length });
    expect((await blob(sha(layer))).equals(layer)).toBe(true);
  });
});

/** Waits (generously) until the sessions a push opens for the next one are open. */
async function sessionsOpen(http: RegistryHttp): Promise<void> {
  for (let i = 0; i < 300 && readySessions(http, 'berth-snapshot') < 2; i++) await new Promise((r) => setTimeout(r, 100));
  expect(readySessions(http, 'berth-snapshot')).toBe(2);
}
