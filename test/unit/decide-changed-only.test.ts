import { describe, expect, it } from 'vitest';
import { applyDecision, changedOnly } from '../../host/kernel/decide';
import type { Task } from '../../host/model';

const task = (over: Partial<Task> = {}): Task => ({
  id: 't',
  sessionId: 's',
  runId: 'r',
  parentId: null,
  kind: 'k',
  kindVersion: 1,
  status: 'running',
  phase: 'step',
  checkpoint: { i: 1 },
  input: {},
  attempts: 0,
  restarts: 0,
  wait: null,
  wakeAt: null,
  outcome: null,
  result: null,
  error: null,
  cancelRequested: false,
  blockedReason: null,
  version: 3,
  createdAt: 0,
  updatedAt: 0,
  ...over,
});

describe('a decision names only the fields it changes', () => {
  it('a phase that stays running in the same phase commits its checkpoint without naming its status, phase or attempts', () => {
    const t = task();
    const { set } = applyDecision(t, { type: 'next', phase: 'step', checkpoint: { i: 2 } }, [], []);
    expect(changedOnly(t, set)).toEqual({ checkpoint: { i: 2 } });
    // The decision itself is left as it was.
    expect(set).toEqual({ status: 'running', phase: 'step', checkpoint: { i: 2 }, attempts: 0 });
  });

  it('keeps every field whose value differs from the row, and JSON fields whatever they hold', () => {
    const t = task({ attempts: 2, phase: 'a' });
    expect(changedOnly(t, { status: 'running', phase: 'b', attempts: 0, checkpoint: { i: 1 } })).toEqual({ phase: 'b', attempts: 0, checkpoint: { i: 1 } });
    expect(changedOnly(t, { status: 'terminal', outcome: 'ok', result: null, error: null, wait: null, wakeAt: null })).toEqual({ status: 'terminal', outcome: 'ok', result: null, error: null, wait: null });
  });
});
