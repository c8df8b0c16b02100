import { describe, expect, it } from 'vitest';
import { applyRescan, manifestDigest, parseScan } from '../../host/snapshot';

describe('workspace manifest', () => {
  it('gives equal digests for equal trees whatever the order, and different ones when a mode or byte changes', () => {
    const a = { './x': 'f:644:aa', './d': 'd:755', './d/y': 'l:../x' };
    const b = { './d/y': 'l:../x', './x': 'f:644:aa', './d': 'd:755' };
    expect(manifestDigest(a)).toBe(manifestDigest(b));
    expect(manifestDigest({ ...a, './x': 'f:600:aa' })).not.toBe(manifestDigest(a));
    expect(manifestDigest({ ...a, './x': 'f:644:ab' })).not.toBe(manifestDigest(a));
  });

  it('drops a deleted directory with everything under it', () => {
    const base = { './d': 'd:755', './d/a': 'f:644:1', './d/e/b': 'f:644:2', './keep': 'f:644:3' };
    expect(applyRescan(base, ['./d'], {})).toEqual({ './keep': 'f:644:3' });
  });

  it('drops the old children of a directory that was deleted and made again, which docker diff does not list', () => {
    const base = { './build': 'd:755', './build/old.o': 'f:644:1', './build/sub/deep': 'f:644:2' };
    const scan = parseScan(['S|directory|755|./build', 'S|regular file|644|./build/new.o', 'H|' + 'f'.repeat(64) + '  ./build/new.o', 'C|./build/new.o'].join('\n'));
    expect(applyRescan(base, ['./build', './build/new.o'], scan.entries, scan.children)).toEqual({ './build': 'd:755', './build/new.o': `f:644:${'f'.repeat(64)}` });
  });

  it('parses names with spaces, pipes in link targets and every entry type', () => {
    const out = [
      'S|regular file|644|./a b',
      'S|symbolic link|777|./l',
      'S|directory|700|./d',
      'S|fifo|644|./p',
      `H|${'1'.repeat(64)}  ./a b`,
      'L|x|y|./l',
    ].join('\n');
    expect(parseScan(out).entries).toEqual({ './a b': `f:644:${'1'.repeat(64)}`, './l': 'l:x|y', './d': 'd:700', './p': 'o:644' });
  });
});
