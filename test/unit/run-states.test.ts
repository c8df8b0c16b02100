import { describe, expect, it } from 'vitest';
import { assertRunTransition, isLegalRunTransition, RUN_STATES, runTransitionEdges, type RunState } from '../../host/model';
import { isBerthError } from '../../host/errors';

const LEGAL: Array<[RunState, RunState]> = [
  ['admitted', 'running'],
  ['running', 'completed'],
  ['running', 'waiting_for_input'],
  ['running', 'awaiting_approval'],
  ['running', 'retry_wait'],
  ['waiting_for_input', 'running'],
  ['awaiting_approval', 'running'],
  ['retry_wait', 'running'],
  ['running', 'cancelling'],
  ['cancelling', 'cancelled'],
  ['cancelling', 'needs_reconciliation'],
  ['running', 'compensating'],
  ['compensating', 'compensated'],
  ['compensating', 'failed'],
  ['compensating', 'needs_reconciliation'],
  ['running', 'needs_reconciliation'],
  ['needs_reconciliation', 'reconciling'],
  ['reconciling', 'completed'],
  ['reconciling', 'compensated'],
  ['reconciling', 'failed'],
  ['reconciling', 'cancelled'],
  ['waiting_for_input', 'cancelled'],
  ['awaiting_approval', 'cancelled'],
  ['retry_wait', 'failed'],
];

describe('run state machine', () => {
  it('allows exactly the edges of the design, no more', () => {
    const key = ([a, b]: [string, string]) => `${a}->${b}`;
    expect(runTransitionEdges().map(key).sort()).toEqual(LEGAL.map(key).sort());
  });

  it.each(LEGAL)('allows %s -> %s', (from, to) => {
    expect(isLegalRunTransition(from, to)).toBe(true);
    expect(() => assertRunTransition('run_1', from, to)).not.toThrow();
  });

  const illegal = RUN_STATES.flatMap((from) => RUN_STATES.map((to): [RunState, RunState] => [from, to])).filter(
    ([from, to]) => !LEGAL.some(([a, b]) => a === from && b === to),
  );
  it.each(illegal)('refuses %s -> %s with a typed error naming the run', (from, to) => {
    expect(isLegalRunTransition(from, to)).toBe(false);
    try {
      assertRunTransition('run_7', from, to);
      expect.unreachable();
    } catch (err) {
      expect(isBerthError(err, 'illegal_run_transition')).toBe(true);
      expect((err as Error).message).toContain('run_7');
      expect((err as { ids: { runId: string } }).ids.runId).toBe('run_7');
    }
  });
});
