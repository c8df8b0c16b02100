import { afterEach, describe, expect, it } from 'vitest';
import { sampleEveryKind, sampleKinds } from '../support/crash-sample';

const all = ['a#1', 'a#2', 'b#1', 'c#1', 'c#2', 'c#3'];
const kindOf = (t: string) => t.split('#')[0]!;

describe('crash samples', () => {
  afterEach(() => {
    delete process.env.BERTH_CRASH_SEED;
    delete process.env.BERTH_CRASH_ALL;
  });

  it('a kind sample kills each picked kind once, and its printed seed picks the same boundaries again', () => {
    process.env.BERTH_CRASH_SEED = '42';
    const picked = sampleKinds(all, 1 / 2, kindOf, 'test');
    expect(picked).toHaveLength(2);
    expect(new Set(picked.map(kindOf)).size).toBe(2);
    expect(sampleKinds(all, 1 / 2, kindOf, 'test')).toEqual(picked);
    process.env.BERTH_CRASH_ALL = '1';
    expect(sampleKinds(all, 1 / 2, kindOf, 'test')).toEqual(all);
  });

  it('an every-kind sample with no share of the rest kills every kind exactly once', () => {
    const picked = sampleEveryKind(all, 0, kindOf, 'test');
    expect(picked.map(kindOf).sort()).toEqual(['a', 'b', 'c']);
  });
});
