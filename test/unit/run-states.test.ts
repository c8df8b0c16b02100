import { describe, expect, it } from 'vitest';
import { assertRunTransition, isLegalRunTransition, RUN_STATES, runTransitionEdges, type RunState } from '../../host/model';
import { isBerthError } from '../../host/errors';
import { runTransitionsForRoot } from '../../host/kernel';

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
  ['waiting_for_input', 'cancelling'],
  ['awaiting_approval', 'cancelling'],
  ['reconciling', 'needs_reconciliation'],
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

describe('run transitions after the root task ends', () => {
  const run = (state: RunState) => ({ id: 'run_1', state }) as Parameters<typeof runTransitionsForRoot>[0];
  const path = (state: RunState, outcome: Parameters<typeof runTransitionsForRoot>[1], unresolved: string[] = []) =>
    runTransitionsForRoot(run(state), outcome, unresolved, 'host:h', '').map((t) => `${t.from}->${t.to}`);

  it('leaves a retry wait first: cancelled while waiting ends cancelled, an error ends failed through compensating', () => {
    expect(path('retry_wait', 'cancelled')).toEqual(['retry_wait->running', 'running->cancelling', 'cancelling->cancelled']);
    expect(path('retry_wait', 'error')).toEqual(['retry_wait->running', 'running->compensating', 'compensating->failed']);
  });

  it('never completes a run with an unresolved effect, wherever it was', () => {
    expect(path('running', 'ok', ['eff_1'])).toEqual(['running->needs_reconciliation']);
    expect(path('retry_wait', 'ok', ['eff_1'])).toEqual(['retry_wait->running', 'running->needs_reconciliation']);
  });

  it('cancels a waiting run through cancelling, and never ends it cancelled over an uncertain effect', () => {
    expect(path('awaiting_approval', 'cancelled')).toEqual(['awaiting_approval->cancelling', 'cancelling->cancelled']);
    expect(path('waiting_for_input', 'cancelled', ['eff_1'])).toEqual(['waiting_for_input->cancelling', 'cancelling->needs_reconciliation']);
  });

  it('sends a run back to needs_reconciliation, not to failed, when effects are still uncertain after reconciling', () => {
    expect(path('reconciling', 'ok', ['eff_1'])).toEqual(['reconciling->needs_reconciliation']);
    expect(path('reconciling', 'error', ['eff_1'])).toEqual(['reconciling->needs_reconciliation']);
    expect(path('reconciling', 'error')).toEqual(['reconciling->failed']);
  });

  it('a run that fails with nothing to compensate says so on its compensating and failed transitions, keeping the cause', () => {
    const moves = runTransitionsForRoot(run('running'), 'error', [], 'host:h', 'turn limit reached (8 turns)');
    expect(moves.map((t) => `${t.from}->${t.to}`)).toEqual(['running->compensating', 'compensating->failed']);
    expect(moves[0]!.reason).toBe('turn limit reached (8 turns); nothing to compensate: Berth keeps no undo actions for this run');
    expect(moves[1]!.reason).toBe('turn limit reached (8 turns) (nothing was compensated)');
  });

  it('every path it returns is made of legal edges', () => {
    for (const state of RUN_STATES) {
      for (const outcome of ['ok', 'error', 'cancelled', 'interrupted'] as const) {
        for (const t of runTransitionsForRoot(run(state), outcome, [], 'host:h', '')) expect(isLegalRunTransition(t.from!, t.to), `${state} ${outcome}: ${t.from}->${t.to}`).toBe(true);
      }
    }
  });
});
