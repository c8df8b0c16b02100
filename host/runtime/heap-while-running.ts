import type { Kernel } from '../kernel';
import { sharedHeapBound } from '../support/heap-bound';


/**
 * Keeps a host's heap near its live data through a run of any length (issue 32 item 1): after a
 * commit, a full collection once the used heap has grown `slackMb` since the last one. A step's
 * rows, events and docker replies are garbage by the next step, but what lives across a scavenge is
 * promoted, and V8 lets the old generation of a ~30 MB heap grow severalfold before it marks it, more
 * so when the machine is loaded (its growth factor follows the mutator's speed): the live heap of a
 * 1,500-step run was flat (41-42 MB) while its RSS grew by 100 MB (bench/RESULTS.md, long sessions
 * 10 and 11). A check is one heap-statistics read; a collection of the live ~30 MB, tens of ms, comes
 * every `slackMb` of promoted garbage (every few hundred steps of a plan).
 */
export function boundHeapWhileRunning(kernel: Pick<Kernel, 'onCommit'>, slackMb = 16): () => void {
  // One bound per process, whatever number of runtimes it builds (tests build many).
  const collect = sharedHeapBound(slackMb);
  return kernel.onCommit(() => collect());
}
