import { describe, expect, it } from 'vitest';
import { manifestDigest, parseListing } from '../../host/snapshot';

const h = (c: string) => c.repeat(64);

describe('workspace manifest', () => {
  it('gives equal digests for equal trees whatever the order, and different ones when a mode or byte changes', () => {
    const a = { './x': 'f:644:aa', './d': 'd:755', './d/y': 'l:../x' };
    const b = { './d/y': 'l:../x', './x': 'f:644:aa', './d': 'd:755' };
    expect(manifestDigest(a)).toBe(manifestDigest(b));
    expect(manifestDigest({ ...a, './x': 'f:600:aa' })).not.toBe(manifestDigest(a));
    expect(manifestDigest({ ...a, './x': 'f:644:ab' })).not.toBe(manifestDigest(a));
  });

  it('parses names with spaces and pipes, link targets with pipes, and every entry type', () => {
    const out = [
      'T|1000',
      'S|regular file|644|3|1.5|1.5|11|./a b|c',
      'S|symbolic link|777|1|1.5|1.5|12|./l',
      'S|directory|700|4096|1.5|1.5|13|./d',
      'S|fifo|644|0|1.5|1.5|14|./p',
      `H|${h('1')}  ./a b|c`,
      'L|x|y|./l',
    ].join('\n');
    const l = parseListing(out, {});
    expect(l.now).toBe(1000);
    expect(l.manifest).toEqual({ './a b|c': `f:644:${h('1')}`, './l': 'l:x|y', './d': 'd:700', './p': 'o:644' });
    expect(l.stats.get('./a b|c')).toEqual({ key: 'regular file|644|3|1.5|1.5|11', regular: true });
  });

  it('takes the hash of a file the listing did not re-hash from the previous manifest, if its mode is the same', () => {
    const prev = { './a': `f:644:${h('2')}`, './b': `f:644:${h('3')}` };
    const l = parseListing(['T|1000', 'S|regular file|644|3|1.5|1.5|11|./a', 'S|regular file|600|3|1.5|1.5|12|./b'].join('\n'), prev);
    expect(l.manifest['./a']).toBe(`f:644:${h('2')}`);
    expect(l.manifest['./b']).toMatch(/^f:600:unreadable:/);
  });

  it('gives a file it could not hash a value no other listing gives, so it never verifies', () => {
    const out = ['T|1000', 'S|regular file|0|3|1.5|1.5|11|./secret'].join('\n');
    expect(manifestDigest(parseListing(out, {}).manifest)).not.toBe(manifestDigest(parseListing(out, {}).manifest));
  });

  it('refuses a listing it cannot parse (a path holding a newline) instead of skipping the path', () => {
    expect(() => parseListing(['T|1000', 'S|regular file|644|3|1.5|1.5|11|./new', 'line'].join('\n'), {})).toThrow(/unexpected line/);
  });
});
