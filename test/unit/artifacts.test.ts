import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pack } from 'tar-stream';
import { afterEach, describe, expect, it } from 'vitest';
import { currentArtifacts, globProblem, globRegExp, globRoot, hashing, LocalArtifactStore } from '../../host/artifacts';
import { copyFileOut } from '../../host/sandbox/artifact-files';
import type { FileContext } from '../../host/sandbox/file-ops';
import type { StoredArtifact } from '../../host/store';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'berth-art-'));
  dirs.push(d);
  return d;
};

describe('artifact globs match workspace paths and nothing outside', () => {
  it('refuses absolute paths, ".." components and empty components', () => {
    expect(globProblem('../etc/*')).toMatch(/\.\./);
    expect(globProblem('a/../../b')).toMatch(/\.\./);
    expect(globProblem('/etc/passwd')).toMatch(/absolute/);
    expect(globProblem('a//b')).toMatch(/empty/);
    expect(globProblem('out/**/*.a')).toBeUndefined();
  });

  it('"*" stays within one directory, "**" crosses any number, including none', () => {
    expect(globRegExp('out/*').test('out/a')).toBe(true);
    expect(globRegExp('out/*').test('out/sub/a')).toBe(false);
    expect(globRegExp('out/**').test('out/sub/deeper/a')).toBe(true);
    expect(globRegExp('out/**/*.a').test('out/x.a')).toBe(true);
    expect(globRegExp('out/**/*.a').test('out/s/t/x.a')).toBe(true);
    expect(globRegExp('out/**/*.a').test('outx/x.a')).toBe(false);
    expect(globRegExp('f?.[ch]').test('f1.c')).toBe(true);
    expect(globRegExp('f?.[!ch]').test('f1.c')).toBe(false);
    expect(globRegExp('a.b').test('axb')).toBe(false);
  });

  it('lists only below the literal prefix, as deep as the pattern reaches', () => {
    expect(globRoot('out/*.a')).toEqual({ dir: 'out', maxDepth: 1 });
    expect(globRoot('out/lib/**')).toEqual({ dir: 'out/lib' });
    expect(globRoot('a.txt')).toEqual({ dir: '', maxDepth: 1 });
    expect(globRoot('*/x')).toEqual({ dir: '', maxDepth: 2 });
  });
});

describe('the local artifact store keeps only complete blobs under their digest', () => {
  it('stores by sha256, and tells present, missing and altered apart', async () => {
    const store = new LocalArtifactStore(tmp());
    const put = await store.put(Readable.from([Buffer.from('hello\n')]));
    expect(put).toEqual({ sha256: sha('hello\n'), size: 6 });
    expect(await store.check(put.sha256, 6)).toBe('present');
    expect(await store.check(sha('other'), 5)).toBe('missing');
    const file = join(store.location, 'sha256', put.sha256);
    chmodSync(file, 0o644);
    writeFileSync(file, 'jello\n');
    expect(await store.check(put.sha256, 6)).toBe('altered');
    // Putting the same bytes again repairs the altered blob.
    await store.put(Readable.from([Buffer.from('hello\n')]));
    expect(await store.check(put.sha256, 6)).toBe('present');
  });

  it('a source that fails midway leaves no blob and no temporary file', async () => {
    const store = new LocalArtifactStore(tmp());
    const broken = new Readable({
      read() {
        this.push(Buffer.alloc(1024, 1));
        this.destroy(new Error('connection reset'));
      },
    });
    await expect(store.put(broken)).rejects.toThrow(/connection reset/);
    expect(readdirSync(join(store.location, 'sha256'))).toEqual([]);
    expect(readdirSync(join(store.location, 'tmp'))).toEqual([]);
  });
});

/** A FileContext whose engine answers getArchive with the given tar entries (the archive parsing is what is under test). */
function archiveContext(entries: Array<{ name: string; type?: 'file' | 'symlink'; linkname?: string; body?: string }>): FileContext {
  const container = {
    async getArchive() {
      const p = pack();
      for (const e of entries) {
        if (e.type === 'symlink') p.entry({ name: e.name, type: 'symlink', linkname: e.linkname });
        else p.entry({ name: e.name, type: 'file', size: Buffer.byteLength(e.body ?? '') }, e.body ?? '');
      }
      p.finalize();
      return p;
    },
  };
  return { container, workspace: '/workspace', owner: { uid: 1000, gid: 1000 }, ids: {} } as unknown as FileContext;
}
const drain = async (data: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of data) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
};

describe('a copied-out archive must hold exactly the file that was checked', () => {
  it('reads the one regular file named like the path', async () => {
    expect(await copyFileOut(archiveContext([{ name: 'lib.a', body: 'abc' }]), '/workspace/out/lib.a', 100, drain)).toBe('abc');
  });

  it('refuses an entry climbing out with ".."', async () => {
    await expect(copyFileOut(archiveContext([{ name: '../../etc/passwd', body: 'root:x' }]), '/workspace/out/lib.a', 100, drain)).rejects.toThrow(/"\.\." component/);
  });

  it('refuses a symlink where the file was (swapped after it was resolved)', async () => {
    await expect(copyFileOut(archiveContext([{ name: 'lib.a', type: 'symlink', linkname: '/etc/passwd' }]), '/workspace/out/lib.a', 100, drain)).rejects.toThrow(/only the regular file lib\.a/);
  });

  it('refuses a second entry smuggled after the file', async () => {
    await expect(copyFileOut(archiveContext([{ name: 'lib.a', body: 'abc' }, { name: 'evil', body: 'x' }]), '/workspace/out/lib.a', 100, drain)).rejects.toThrow(/"evil"/);
  });

  it('refuses a file that grew past what the limits leave', async () => {
    await expect(copyFileOut(archiveContext([{ name: 'lib.a', body: 'x'.repeat(200) }]), '/workspace/out/lib.a', 100, drain)).rejects.toThrow(/more than the 100/);
  });
});

describe('the artifacts that stand for a run', () => {
  const rec = (stepIndex: number, generation: number, path: string): StoredArtifact => ({
    id: `${stepIndex}:${generation}:${path}`, runId: 'r', taskId: null, stepIndex, generation, step: `s${stepIndex}`, path, sizeBytes: 1, sha256: sha(path), snapshotId: null, sessionId: 's', commitSeq: 1, createdAt: 0,
  });
  it('a step re-run in a later generation supersedes its earlier records; steps not reached yet are left out', () => {
    const all = [rec(0, 0, 'a'), rec(0, 0, 'old'), rec(0, 1, 'a'), rec(1, 0, 'b'), rec(2, 1, 'c')];
    expect(currentArtifacts(all).map((a) => a.id)).toEqual(['0:1:a', '1:0:b', '2:1:c']);
    expect(currentArtifacts(all, 2).map((a) => a.id)).toEqual(['0:1:a', '1:0:b']);
  });
});

describe('a hashing stream with an expectation', () => {
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  const through = async (bytes: Buffer, expect: { sha256: string; size: number }) => {
    const t = hashing({ ...expect, error: (got) => new Error(`got ${got.size} bytes`) });
    const out: Buffer[] = [];
    t.on('data', (c: Buffer) => out.push(c));
    await new Promise<void>((resolve, reject) => {
      t.on('end', resolve);
      t.on('error', reject);
      Readable.from([bytes]).pipe(t);
    });
    return Buffer.concat(out);
  };

  it('passes the bytes through when they are the expected ones (with or without the sha256: prefix)', async () => {
    const b = Buffer.from('artifact bytes');
    expect((await through(b, { sha256: `sha256:${sha(b)}`, size: b.length })).equals(b)).toBe(true);
    expect((await through(b, { sha256: sha(b), size: b.length })).equals(b)).toBe(true);
  });

  it('ends in an error, not an end, when the bytes or their count differ', async () => {
    const b = Buffer.from('artifact bytes');
    await expect(through(Buffer.from('artifact bytez'), { sha256: sha(b), size: b.length })).rejects.toThrow('got 14 bytes');
    await expect(through(b, { sha256: sha(b), size: b.length + 1 })).rejects.toThrow('got 14 bytes');
  });
});
