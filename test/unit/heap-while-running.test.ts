import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import type { CommitEvent } from '../../host/kernel';
import { runInNewContext } from 'node:vm';
import { heapBound } from '../../host/support/heap-bound';
import { boundHeapWhileRunning } from '../../host/runtime/heap-while-running';

const MB = 1024 * 1024;
const used = () => getHeapStatistics().used_heap_size;
/** About `mb` MB of arrays, each large enough to be allocated straight into the old generation. */
const garbage = (mb: number) => Array.from({ length: Math.ceil(mb / 1.6) }, () => Array.from({ length: 200_000 }, (_, i) => i));
/** Bytes `collect` frees when it runs right after `mb` MB of garbage was made and dropped. */
function freedBy(collect: () => void, mb: number): number {
  let made: number[][] | null = garbage(mb);
  const grown = used();
  expect(made.length).toBeGreaterThan(0);
  made = null;
  collect();
  return grown - used();
}

describe('a host keeps its heap near its live data while runs commit', () => {
  it('collects after a commit once the used heap grew by the slack since the last collection, and not after a commit that grew it less', () => {
    const listeners: Array<(e: CommitEvent) => void> = [];
    boundHeapWhileRunning({ onCommit: (l) => (listeners.push(l), () => {}) }, 16);
    const commit = () => {
      for (const l of listeners) l({} as CommitEvent);
    };
    // Past the slack: the garbage (unreachable once the commit comes) is collected at the commit.
    expect(freedBy(commit, 24)).toBeGreaterThan(12 * MB);
    // Under the slack: nothing is collected at the commit.
    expect(freedBy(commit, 4)).toBeLessThan(MB);
  });
});

describe('the heap bound counts its slack from the heap\'s latest low', () => {
  it('after a collection V8 made on its own, collects once the heap grew by the slack from there (not from the higher mark before it)', () => {
    // Held while the bound takes its first mark, as a run's start-up garbage is.
    let startup: number[][] | null = garbage(10);
    const collectIfGrown = heapBound(16);
    expect(startup.length).toBeGreaterThan(0);
    startup = null;
    // V8's own collection frees it; the bound is asked after it.
    (runInNewContext('gc') as () => void)();
    collectIfGrown();
    // 18 MB of garbage: past the slack from the low, 8 MB over the old mark.
    expect(freedBy(collectIfGrown, 18)).toBeGreaterThan(12 * MB);
  });
});

describe('a read that keeps little asks the heap bound for less slack', () => {
  it('collects at the smaller slack a caller asks for, and never at more than the process\'s', () => {
    const collectIfGrown = heapBound(16);
    (runInNewContext('gc') as () => void)();
    collectIfGrown();
    // 6 MB of garbage: under the process's 16 MB, past an export's 4 MB.
    expect(freedBy(() => collectIfGrown(), 6)).toBeLessThan(MB);
    (runInNewContext('gc') as () => void)();
    collectIfGrown();
    expect(freedBy(() => collectIfGrown(4), 6)).toBeGreaterThan(3 * MB);
    // A larger slack than the process's is the process's.
    (runInNewContext('gc') as () => void)();
    collectIfGrown();
    expect(freedBy(() => collectIfGrown(64), 24)).toBeGreaterThan(12 * MB);
  });
});
