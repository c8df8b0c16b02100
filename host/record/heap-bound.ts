import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full collection whenever the heap has grown by `slackMb` since the last one. An export reads a
 * long run's rows page by page and keeps almost none of them, but rows that live across a scavenge
 * are promoted, and V8 lets the old generation of a small heap grow about fourfold before it marks
 * it: a 3,000-step export kept ~28 MB live yet grew the heap to 100 MB. Collecting at a fixed slack
 * keeps the process's memory near its live data (a few collections of a ~30 MB heap, tens of ms
 * each). The collector is reached the way `--expose-gc` exposes it; where that is refused, nothing
 * is collected early.
 */
export function heapBound(slackMb = 16): () => void {
  let gc: (() => void) | undefined;
  try {
    // The young generation stays at its starting size (1-2 MB) instead of growing to 32 MB under
    // the pages' allocation rate: that growth was the largest part of a long export's peak RSS
    // (bench/RESULTS.md, long session 10). The flag is read each time V8 would grow it.
    setFlagsFromString('--semi-space-growth-factor=1');
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  } catch {
    return () => {};
  }
  let mark = getHeapStatistics().used_heap_size;
  return () => {
    if (getHeapStatistics().used_heap_size - mark < slackMb * 1024 * 1024) return;
    gc!();
    mark = getHeapStatistics().used_heap_size;
  };
}
