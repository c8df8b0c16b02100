import type { Run } from '../../model';

/** Where a fork starts: the run and the checkpoint (snapshot) it continues from. */
export interface ForkOrigin {
  runId: string;
  snapshotId: string;
  checkpoint: string;
  index: number;
}

/**
 * What `run`, `agent` and `fork` print with `--detach --json`: one shape for all three, so a
 * script that submits work reads the same fields whichever command it used (`forkedFrom` is null
 * for a run that is no fork). `run` is the whole run row, as the answer of a driven run has it.
 */
export function detachedAnswer(run: Run, created: boolean, forkedFrom: ForkOrigin | null = null) {
  return { detached: true as const, created, runId: run.id, sessionId: run.sessionId, state: run.state, forkedFrom, run };
}
