import { BerthError } from '../errors';

/** The run lifecycle of DESIGN.md; `completed`, `cancelled`, `compensated` and `failed` are final. */
export const RUN_STATES = [
  'admitted',
  'running',
  'waiting_for_input',
  'awaiting_approval',
  'retry_wait',
  'cancelling',
  'compensating',
  'needs_reconciliation',
  'reconciling',
  'completed',
  'cancelled',
  'compensated',
  'failed',
] as const;
export type RunState = (typeof RUN_STATES)[number];

const EDGES: Record<RunState, readonly RunState[]> = {
  admitted: ['running'],
  running: [
    'completed',
    'waiting_for_input',
    'awaiting_approval',
    'retry_wait',
    'cancelling',
    'compensating',
    'needs_reconciliation',
  ],
  // Cancel always passes through `cancelling`: a sibling task may be mid-effect, and the run
  // may end only once nothing of it is still happening.
  waiting_for_input: ['running', 'cancelling'],
  awaiting_approval: ['running', 'cancelling'],
  retry_wait: ['running', 'failed'],
  cancelling: ['cancelled', 'needs_reconciliation'],
  compensating: ['compensated', 'failed', 'needs_reconciliation'],
  needs_reconciliation: ['reconciling'],
  // Back to needs_reconciliation when the operator's decision cannot be carried out or leaves
  // effects uncertain: a failed reconciliation attempt never ends the run.
  reconciling: ['completed', 'compensated', 'failed', 'cancelled', 'needs_reconciliation'],
  completed: [],
  cancelled: [],
  compensated: [],
  failed: [],
};

/** True when the run state machine allows `from -> to`. */
export function isLegalRunTransition(from: RunState, to: RunState): boolean {
  return EDGES[from].includes(to);
}

/** States a run never leaves. */
export function isFinalRunState(state: RunState): boolean {
  return EDGES[state].length === 0;
}

/** The states of a run not yet ended (a run parked for a decision among them): what "the open runs" of a session are. */
export const OPEN_RUN_STATES: readonly RunState[] = RUN_STATES.filter((s) => !isFinalRunState(s));

/** Throws `illegal_run_transition` unless `from -> to` is an edge of the run state machine. */
export function assertRunTransition(runId: string, from: RunState, to: RunState): void {
  if (!isLegalRunTransition(from, to)) {
    const allowed = EDGES[from].length ? EDGES[from].join(', ') : 'none (final state)';
    throw new BerthError('illegal_run_transition', `run ${runId} cannot go from ${from} to ${to}; allowed: ${allowed}`, {
      ids: { runId },
      details: { from, to },
    });
  }
}

/** Every edge, for tests and documentation. */
export function runTransitionEdges(): Array<[RunState, RunState]> {
  return RUN_STATES.flatMap((from) => EDGES[from].map((to): [RunState, RunState] => [from, to]));
}
