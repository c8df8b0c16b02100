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
export function heapBound(slackMb = 16): (smallerSlackMb?: number) => void {
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
  return (slack = slackMb) => {
    const used = getHeapStatistics().used_heap_size;
    // A collection V8 made on its own lowers the mark: the slack counts from the heap's latest low.
    // Marked once before a run's start-up garbage (the plan's YAML document, its validation) and
    // kept there after V8 freed it, the first bound of a 3,000-step run let the heap grow ~28 MB
    // instead of 16 (bench/RESULTS.md, session 16).
    if (used < mark) mark = used;
    if (used - mark < Math.min(slack, slackMb) * 1024 * 1024) return;
    gc!();
    mark = getHeapStatistics().used_heap_size;
  };
}

/** `BERTH_HEAP_SLACK_MB` (default 16; 0 turns the bound off). */
const slackFromEnv = (): number => {
  const n = Number(process.env.BERTH_HEAP_SLACK_MB ?? 16);
  return Number.isFinite(n) && n >= 0 ? n : 16;
};

let shared: (() => void) | undefined;

/**
 * The process's one bound, made with the first slack asked for: a run's commits, an export's pages
 * and every long list read page by page ({@link collectIfGrown}) count against the same mark, so
 * garbage one of them left is counted by the next (a 3,000-step run's end read its tasks and
 * effects and printed its summary within 340 ms, ~45 MB of garbage no commit came to bound).
 */
export function sharedHeapBound(slackMb = slackFromEnv()): (smallerSlackMb?: number) => void {
  return (shared ??= slackMb > 0 ? heapBound(slackMb) : () => {});
}

/**
 * A full collection when the heap grew by the process's slack since the last one (see
 * {@link heapBound}), or by `slackMb` when that is smaller: a read that allocates a lot and keeps
 * little (an export) asks for less slack than a run's commits.
 */
export const collectIfGrown = (slackMb?: number): void => sharedHeapBound()(slackMb);
