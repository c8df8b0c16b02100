/** The effect id of step `index` in `generation` (bumped by each reconciliation or rewind that re-runs steps). */
export const stepEffectId = (runId: string, index: number, generation: number) => `${runId}:step:${index}:g${generation}`;

/**
 * The step index a snapshot's checkpoint continues from: `upload` before step 0, `step:N:…` after
 * step N, `reconciled:K` before step K. (The older `accept:N` is read as before step N: a step
 * that did run there is then recognised by its effect and not executed again.)
 */
export function nextIndexOf(checkpoint: string): number {
  const step = /^step:(\d+):/.exec(checkpoint);
  if (step) return Number(step[1]) + 1;
  const before = /^(?:reconciled|accept):(\d+)/.exec(checkpoint);
  return before ? Number(before[1]) : 0;
}

/** Entry kind: the operator continued past these missing or altered artifacts (`berth reconcile`); they are not checked again. */
export const ARTIFACTS_WAIVED = 'plan.artifacts.waived';
/** Entry kind: artifacts found missing or altered; the steps from `from` run again from snapshot `snapshotId`. */
export const ARTIFACTS_RERUN = 'plan.artifacts.rerun';
