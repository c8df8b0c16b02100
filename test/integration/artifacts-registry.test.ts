import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { digestOf, RegistryArtifactStore } from '../../host/artifacts';
import { lastJson, planFixture } from '../support/plan-fixture';
import { startRegistry, type TestRegistry } from '../support/registry';

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** Debian's docker-registry on a free loopback port with its storage in a temp dir, for this file. */
let registry: { url: string; root: string; reg: TestRegistry } | undefined;

beforeAll(async () => {
  const reg = await startRegistry();
  registry = { url: `http://${reg.address}`, root: reg.storage, reg };
}, 30_000);

afterAll(async () => {
  await registry?.reg.stop();
});

const blobData = (sha: string) => join(registry!.root, 'docker', 'registry', 'v2', 'blobs', 'sha256', sha.slice(0, 2), sha, 'data');

describe('artifacts kept as OCI blobs in a registry', { timeout: 300_000 }, () => {
  let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
  afterEach(async () => {
    await fx?.cleanup();
    fx = undefined;
  });

  it('stores a blob by its digest and tells present, altered and missing apart', async () => {
    const store = new RegistryArtifactStore(`${registry!.url}/berth/artifacts`);
    const bytes = randomBytes(1 << 20);
    const put = await store.put(Readable.from([bytes.subarray(0, 300_000), bytes.subarray(300_000)]));
    expect(put).toEqual({ sha256: sha256(bytes), size: bytes.length });
    expect(await store.check(put.sha256, put.size)).toBe('present');
    expect((await digestOf(await store.open(put.sha256))).sha256).toBe(put.sha256);
    // The same bytes again: accepted, still one blob.
    expect(await store.put(Readable.from([bytes]))).toEqual(put);

    const data = readFileSync(blobData(put.sha256));
    data[0] = data[0]! ^ 0xff;
    writeFileSync(blobData(put.sha256), data);
    expect(await store.check(put.sha256, put.size)).toBe('altered');
    unlinkSync(blobData(put.sha256));
    expect(await store.check(put.sha256, put.size)).toBe('missing');
    await expect(store.open(put.sha256)).rejects.toThrow(/not in the artifact registry/);
  });

  it('a plan run with BERTH_ARTIFACT_REGISTRY keeps its artifacts there and berth artifacts fetches them intact', async () => {
    fx = await planFixture([{ name: 'build', run: 'mkdir out && head -c 200000 /dev/urandom > out/lib.a && echo hi > out/notes.txt', artifacts: ['out/*'] }]);
    const env = { BERTH_ARTIFACT_REGISTRY: `${registry!.url}/berth/run-artifacts` };
    const end = await fx.cli(['run', fx.plan, '--json'], env);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    const out = join(fx.dir, 'fetched');
    const fetched = await fx.cli(['artifacts', runId, '--out', out, '--json'], env);
    expect(fetched.code, fetched.stderr).toBe(0);
    const listed = lastJson<{ store: string; artifacts: Array<{ path: string; sha256: string; status: string }> }>(fetched);
    expect(listed.store).toBe(`${registry!.url}/berth/run-artifacts`);
    expect(listed.artifacts.map((a) => [a.path, a.status])).toEqual([['out/lib.a', 'present'], ['out/notes.txt', 'present']]);
    for (const a of listed.artifacts) {
      expect(sha256(readFileSync(join(out, a.path)))).toBe(a.sha256);
      expect(existsSync(blobData(a.sha256))).toBe(true);
    }
    // Nothing went to the local directory.
    expect(existsSync(join(fx.dir, 'artifacts'))).toBe(false);
  });
});
