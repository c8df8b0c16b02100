import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { fetchArtifacts, LocalArtifactStore } from '../../host/artifacts';
import type { StoredArtifact } from '../../host/store';

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

async function oneArtifact(): Promise<{ store: LocalArtifactStore; records: StoredArtifact[] }> {
  dir = mkdtempSync(join(tmpdir(), 'berth-fetch-out-'));
  const store = new LocalArtifactStore(join(dir, 'blobs'));
  const { sha256, size } = await store.put(Readable.from([Buffer.from('built\n')]));
  const record = { runId: 'run_1', taskId: 'task_1', path: 'out/a.txt', sha256, sizeBytes: size, mode: 0o644, sessionId: 'ses_1', commitSeq: 1, createdAt: 0 } as unknown as StoredArtifact;
  return { store, records: [record] };
}

describe('berth artifacts --out', () => {
  it('creates a missing output directory and its parents, and fetches into it', async () => {
    const { store, records } = await oneArtifact();
    const out = join(dir, 'new', 'deep');
    expect(await fetchArtifacts(store, records, out)).toMatchObject([{ path: 'out/a.txt', status: 'fetched' }]);
    expect(readFileSync(join(out, 'out', 'a.txt'), 'utf8')).toBe('built\n');
  });

  it('refuses a file in the way with output_unwritable naming it (it was an internal ENOTDIR)', async () => {
    const { store, records } = await oneArtifact();
    const file = join(dir, 'plan.yaml');
    writeFileSync(file, 'name: x\n');
    await expect(fetchArtifacts(store, records, join(file, 'sub'))).rejects.toMatchObject({ code: 'output_unwritable', message: expect.stringContaining(`${file} is a file, not a directory`) });
    expect(readFileSync(file, 'utf8')).toBe('name: x\n');
  });

  it('refuses a directory that cannot be created under /proc at once (a recursive mkdir there spun for ever)', async () => {
    const { store, records } = await oneArtifact();
    await expect(fetchArtifacts(store, records, '/proc/berth-no-such-dir/out')).rejects.toMatchObject({ code: 'output_unwritable', message: expect.stringContaining('cannot create /proc/berth-no-such-dir') });
  }, 10_000);
});
