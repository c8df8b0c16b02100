import { chmodSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { layerChangedPath, scanLayer } from '../../host/snapshot/layer-scan';

// Upper and merged are one directory here (an upper-only layer: a deletion leaves no whiteout, only
// its directory's new mtime), the harder case for the reading. The real overlay is in
// test/integration/snapshot-change.test.ts.
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const older = () => new Promise((r) => setTimeout(r, 80));

function tree() {
  const root = mkdtempSync(join(tmpdir(), 'berth-layer-'));
  dirs.push(root);
  const w = join(root, 'w');
  for (const d of ['a/b', 'c', 'd']) mkdirSync(join(w, d), { recursive: true });
  for (let i = 0; i < 50; i++) writeFileSync(join(w, 'd', `f${i}`), `${i}`);
  writeFileSync(join(w, 'a/b/x'), '1');
  writeFileSync(join(w, 'a/y'), '2');
  writeFileSync(join(w, 'c/z'), '3');
  writeFileSync(join(w, 'top'), '5');
  symlinkSync('top', join(w, 'link'));
  return { layer: { upper: root, merged: root }, w };
}

describe('layer scan', () => {
  it('re-reads only what changed since the previous reading, and ends where a full reading ends, after deletions, a directory made anew, a rename over a file and a type change', async () => {
    const { layer, w } = tree();
    await older();
    let prev = await scanLayer(layer, '/w', null);
    expect(prev.hashed).toBe(54);
    const steps: Array<[string, () => void]> = [
      ['rm a/b/x', () => unlinkSync(join(w, 'a/b/x'))],
      ['c made anew', () => (rmSync(join(w, 'c'), { recursive: true }), mkdirSync(join(w, 'c')), writeFileSync(join(w, 'c/n'), 'new'))],
      ['mv d/f1 top', () => renameSync(join(w, 'd/f1'), join(w, 'top'))],
      ['link becomes a directory', () => (unlinkSync(join(w, 'link')), mkdirSync(join(w, 'link')), writeFileSync(join(w, 'link/f'), 'in'))],
      ['rm -rf a', () => rmSync(join(w, 'a'), { recursive: true })],
      ['chmod 600 top', () => chmodSync(join(w, 'top'), 0o600)],
    ];
    for (const [name, step] of steps) {
      await older();
      step();
      const next = await scanLayer(layer, '/w', { manifest: prev.manifest, since: prev.startedAt });
      expect(next.manifest, name).toEqual((await scanLayer(layer, '/w', null)).manifest);
      expect(next.hashed, `${name}: the 50 untouched files under d/ are not read again`).toBeLessThanOrEqual(2);
      expect(next.manifest).not.toEqual(prev.manifest);
      prev = next;
    }
  });

  it('tells a write after the reading began, even one that keeps the size, and nothing when nothing moved', async () => {
    const { layer, w } = tree();
    await older();
    writeFileSync(join(w, 'top'), '6');
    const first = await scanLayer(layer, '/w', null);
    expect(await layerChangedPath(layer, '/w', first)).toBeNull();
    // Same size, same clock tick as the reading: only the hash can tell.
    writeFileSync(join(w, 'top'), '7');
    expect(await layerChangedPath(layer, '/w', first)).toBe('./top');
  });
});
