import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfinedTree, hashConfined, nameBytes, nameString, ReadBudget, DEFAULT_READ_BOUNDS } from '../../host/snapshot/confined';
import { scanLayer } from '../../host/snapshot/layer-scan';
import { buildDeltaLayer } from '../../host/snapshot/delta/delta-layer';
import { manifestDigest } from '../../host/snapshot/manifest';
import { isBerthError } from '../../host/errors';
import { watchOpens } from '../support/open-watch';

// Real directories on this machine: the sandbox's overlay directories are plain directories to the host.
const roots: string[] = [];
afterEach(() => {
  // GNU rm walks by descriptors: it removes trees too deep for a path.
  for (const r of roots.splice(0)) execFileSync('rm', ['-rf', r]);
});
function temp() {
  const root = mkdtempSync(join(tmpdir(), 'berth-confined-'));
  roots.push(root);
  mkdirSync(join(root, 'w'));
  return root;
}
const rchar = () => Number(/rchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
const budget = (o: Partial<typeof DEFAULT_READ_BOUNDS> = {}, signal?: AbortSignal) => new ReadBudget({ ...DEFAULT_READ_BOUNDS, ...o }, signal);

describe('confined reading of a sandbox directory', () => {
  it('never resolves a path through a symlink the sandbox put in place of a directory, and never opens a FIFO or a file outside', async () => {
    const root = temp();
    const outside = join(root, 'outside');
    mkdirSync(join(outside, 'd'), { recursive: true });
    writeFileSync(join(outside, 'd', 'marker'), 'host secret');
    chmodSync(join(outside, 'd', 'marker'), 0o600);
    execFileSync('mkfifo', [join(outside, 'd', 'fifo')]);
    execFileSync('mkfifo', [join(root, 'w', 'pipe')]);
    const w = join(root, 'w');
    mkdirSync(join(w, 'x', 'd'), { recursive: true });
    writeFileSync(join(w, 'x', 'd', 'marker'), 'workspace');
    writeFileSync(join(w, 'x', 'd', 'fifo'), 'workspace');
    const tree = ConfinedTree.at(root, '/w')!;
    const watch = await watchOpens([join(outside, 'd', 'marker'), join(outside, 'd', 'fifo'), join(w, 'pipe')]);
    try {
      // The swap lands between the listing and the reads, as a racer times it.
      renameSync(join(w, 'x'), join(w, 'x.old'));
      symlinkSync(outside, join(w, 'x'));
      expect(tree.dir('./x/d')).toBeUndefined();
      expect(tree.openFile('./x/d/marker')).toBeUndefined();
      expect(await hashConfined(tree, './x/d/fifo', budget())).toBeUndefined();
      expect(await hashConfined(tree, './pipe', budget())).toBeUndefined();
      expect(tree.lstat('./x')!.isSymbolicLink()).toBe(true);
      // The watch works: the test's own read of the marker is seen, and it is the only event.
      readFileSync(join(outside, 'd', 'marker'));
      await watch.waitFor(join(outside, 'd', 'marker'));
    } finally {
      tree.close();
    }
    const events = await watch.stop();
    expect(events.filter((e) => e.includes('OPEN'))).toEqual([`${join(outside, 'd', 'marker')} OPEN`]);
  });

  it('keeps every name as its bytes: a name that is not UTF-8 is in the manifest and the digest, distinct from its neighbours', async () => {
    const root = temp();
    const w = Buffer.from(join(root, 'w'));
    for (const n of [Buffer.from('a\xff', 'latin1'), Buffer.from('a\xfe', 'latin1'), Buffer.from('a\uFFFD'), Buffer.from('d\xe9j\xe0', 'latin1')]) writeFileSync(Buffer.concat([w, Buffer.from('/'), n]), n);
    symlinkSync(Buffer.from('t\xff', 'latin1'), Buffer.concat([w, Buffer.from('/link')]));
    const l = await scanLayer({ upper: root, merged: root }, '/w', null);
    expect(Object.keys(l.manifest).sort()).toEqual(['./a\udcfe', './a\udcff', './a\uFFFD', './d\udce9j\udce0', './link'].sort());
    expect(l.manifest['./link']).toBe('l:t\udcff');
    expect(l.complete).toBe(true);
    // Each file's bytes are its name's: a file was read under its own name.
    const { createHash } = await import('node:crypto');
    expect(l.manifest['./a\udcff']).toBe(`f:644:${createHash('sha256').update(Buffer.from('a\xff', 'latin1')).digest('hex')}`);
    const other = { ...l.manifest, './a\udcfe': l.manifest['./a\udcff']!, './a\udcff': l.manifest['./a\udcfe']! };
    expect(manifestDigest(other)).not.toBe(manifestDigest(l.manifest));
    for (let i = 0; i < 2000; i++) {
      const b = Buffer.from(Array.from({ length: 1 + (i % 7) }, (_, j) => ((i * 31 + j * 97) % 255) + 1).filter((x) => x !== 0x2f));
      expect(nameBytes(nameString(b)).equals(b)).toBe(true);
    }
  });

  it('walks a tree 1,900 directories deep, refuses a 5,000-deep one by the path length an image layer keeps and a deep one past the depth bound, by name, with no path too long and no host path', async () => {
    const root = temp();
    // Chains moved into each other: no path the shell uses is longer than PATH_MAX.
    const chains = (top: string, n: number) => `p=$(printf "/a%.0s" $(seq 949)) && mkdir -p "${top}$p" && echo deep > "${top}$p/f" && i=1; while [ $i -lt ${n} ]; do mkdir -p "t$p" && mv ${top} "t$p/a" && mv t ${top} || exit 1; i=$((i+1)); done`;
    execFileSync('sh', ['-c', `cd "$1" && ${chains('b', 2)}`, 'sh', join(root, 'w')]);
    const l = await scanLayer({ upper: root, merged: root }, '/w', null);
    expect(l.complete).toBe(true);
    expect(Object.keys(l.manifest)).toHaveLength(1901);
    expect(l.manifest[`./b${'/a'.repeat(1899)}/f`]).toMatch(/^f:644:/);
    const deep = await scanLayer({ upper: root, merged: root }, '/w', null, budget({ maxDepth: 1000 })).catch((e: unknown) => e);
    expect(isBerthError(deep, 'snapshot_bound_exceeded')).toBe(true);
    expect((deep as Error).message).toContain('depth bound');
    expect((deep as Error).message).not.toContain(root);
    execFileSync('sh', ['-c', `cd "$1" && ${chains('a', 6)}`, 'sh', join(root, 'w')]);
    const long = await scanLayer({ upper: root, merged: root }, '/w', null).catch((e: unknown) => e);
    expect(isBerthError(long, 'snapshot_bound_exceeded'), String(long)).toBe(true);
    expect((long as Error).message).toContain('path length bound');
    expect((long as Error).message).not.toContain(root);
  });

  it('refuses a 1 TB sparse file past the disk limit or the byte bound before reading a byte, and hashes a hole without reading it', async () => {
    const root = temp();
    execFileSync('truncate', ['-s', '1T', join(root, 'w', 'big')]);
    execFileSync('truncate', ['-s', '64M', join(root, 'w', 'hole')]);
    const before = rchar();
    for (const [bounds, bound] of [[{ diskLimitBytes: 1 << 30 }, 'disk bound'], [{ maxBytes: 2 ** 36 }, 'bytes bound']] as const) {
      const err = await scanLayer({ upper: root, merged: root }, '/w', null, budget(bounds)).catch((e: unknown) => e);
      expect(isBerthError(err, 'snapshot_bound_exceeded')).toBe(true);
      expect((err as Error).message).toContain(bound);
      expect((err as Error).message).toContain('./big');
      expect((err as Error).message).not.toContain(root);
    }
    rmSync(join(root, 'w', 'big'));
    const l = await scanLayer({ upper: root, merged: root }, '/w', null);
    expect(rchar() - before).toBeLessThan(1 << 20);
    // The same digest as the same bytes written out.
    const { createHash } = await import('node:crypto');
    expect(l.manifest['./hole']).toBe(`f:644:${createHash('sha256').update(Buffer.alloc(64 << 20)).digest('hex')}`);
  });

  it('stops hashing a 1 TB hole when the run is cancelled, long before it would end', async () => {
    const root = temp();
    execFileSync('truncate', ['-s', '1T', join(root, 'w', 'big')]);
    const ac = new AbortController();
    const before = rchar();
    const scan = scanLayer({ upper: root, merged: root }, '/w', null, budget({ maxBytes: 2 ** 41 }, ac.signal)).then(
      () => 'finished',
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 300));
    const abortedAt = Date.now();
    ac.abort(new Error('cancelled by the test'));
    const out = await scan;
    // Hashing 1 TB takes minutes; a cancel lands between two 64 MiB steps.
    expect(Date.now() - abortedAt).toBeLessThan(10_000);
    expect((out as Error).message).toBe('cancelled by the test');
    expect(rchar() - before).toBeLessThan(1 << 20);
  });

  it('refuses a delta layer of 20,000 empty directories or 5,000 links from the count of entries, before building it', async () => {
    const root = temp();
    const w = join(root, 'w');
    execFileSync('sh', ['-c', 'cd "$1" && mkdir m l && cd m && seq 20000 | xargs mkdir', 'sh', w]);
    for (let i = 0; i < 5000; i++) symlinkSync(`target${i}`, join(w, 'l', String(i)));
    const now = (await scanLayer({ upper: root, merged: root }, '/w', null)).manifest;
    for (const sub of ['./m', './l']) {
      const part = Object.fromEntries(Object.entries(now).filter(([p]) => p === sub || p.startsWith(`${sub}/`)));
      const rss = process.memoryUsage().rss;
      const r = await buildDeltaLayer({ dirs: { upper: root, merged: root }, ws: '/w', base: {}, now: part, since: 0, maxBytes: 1 << 20 });
      expect('refused' in r && r.refused).toMatch(/more than 1048576 bytes changed/);
      expect(process.memoryUsage().rss - rss).toBeLessThan(100 << 20);
    }
    // 25,000 entries made, scanned and counted: 70-90 s at load 25, far past the default bound.
  }, 300_000);
});
