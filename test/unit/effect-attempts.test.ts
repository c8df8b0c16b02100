import { describe, expect, it } from 'vitest';
import { operatorReceipt } from '../../host/kernel';
import type { EffectAttempt } from '../../host/model';
import { nextAttemptLog, type EffectBefore } from '../../host/store/commit/effect-attempts';

const base: EffectBefore = { status: 'intended', attempts: 0, runId: 'run_a', taskId: 'task_a', log: [] };
const begun = (n: number, over: Partial<EffectAttempt> = {}): EffectAttempt => ({
  id: `e#${n}`, n, runId: 'run_a', taskId: 'task_a', epoch: 3, startedAt: 100, endedAt: null, outcome: 'in_flight', settledBy: null, settledAt: null, actor: null, error: null, ...over,
});

describe('the attempt log an effect write leaves', () => {
  it('a move to executing begins an attempt under the commit\'s epoch, by the owner after the write', () => {
    const log = nextAttemptLog(base, { id: 'e', set: { status: 'executing', attempts: 1, owner: { runId: 'run_b', taskId: 'task_b' } } }, 100, 7, 'host');
    expect(log).toEqual([{ ...begun(1), runId: 'run_b', taskId: 'task_b', epoch: 7 }]);
  });

  it('a reply ends the open attempt with its outcome and error, and a later attempt leaves that error in place', () => {
    const failed = nextAttemptLog({ ...base, status: 'executing', attempts: 1, log: [begun(1)] }, { id: 'e', set: { status: 'failed', error: { code: 'x', delivery: 'not_sent' } } }, 200, 3, 'host')!;
    expect(failed[0]).toMatchObject({ outcome: 'not_applied', settledBy: 'reply', endedAt: 200, error: { code: 'x' } });
    const again = nextAttemptLog({ ...base, status: 'failed', attempts: 1, log: failed }, { id: 'e', set: { status: 'executing', attempts: 2 } }, 300, 4, 'host')!;
    expect(again.map((a) => [a.n, a.outcome, a.error])).toEqual([[1, 'not_applied', { code: 'x', delivery: 'not_sent' }], [2, 'in_flight', null]]);
  });

  it('an operator\'s "did not happen" on an uncertain attempt is the operator\'s word, with who said it', () => {
    const unknown = [begun(1, { outcome: 'unknown', endedAt: 150 })];
    const log = nextAttemptLog(
      { ...base, status: 'unknown', attempts: 1, log: unknown },
      { id: 'e', set: { status: 'failed', receipt: operatorReceipt('user:tester', 'reject', 400, 'did not happen'), error: { code: 'operator_rejected' } } },
      400, null, 'user:tester',
    )!;
    expect(log[0]).toMatchObject({ outcome: 'not_applied', settledBy: 'operator', actor: 'user:tester', endedAt: 150, settledAt: 400 });
  });

  it('a settlement of an effect written before attempts were kept is kept as an attempt with no start', () => {
    const log = nextAttemptLog({ ...base, status: 'unknown', attempts: 2 }, { id: 'e', set: { status: 'confirmed', receipt: { id: 'm1' } }, settle: { by: 'status_query', actor: 'user:ops' } }, 500, null, 'user:ops')!;
    expect(log).toEqual([expect.objectContaining({ id: 'e#2', n: 2, startedAt: null, outcome: 'applied', settledBy: 'status_query', actor: 'user:ops' })]);
  });

  it('a safe action repeated after a crash marks the attempt left in flight unknown, and an adoption that changes nothing known writes no attempt', () => {
    const log = nextAttemptLog({ ...base, status: 'executing', attempts: 1, log: [begun(1)] }, { id: 'e', expectStatus: 'executing', set: { status: 'executing', attempts: 2 } }, 600, 5, 'host')!;
    expect(log.map((a) => [a.n, a.outcome, a.endedAt])).toEqual([[1, 'unknown', 600], [2, 'in_flight', null]]);
    const unknown = [begun(1, { outcome: 'unknown', endedAt: 150 })];
    expect(nextAttemptLog({ ...base, status: 'unknown', attempts: 1, log: unknown }, { id: 'e', set: { status: 'unknown', owner: { runId: 'run_b', taskId: 't' } } }, 700, 5, 'host')).toBeNull();
  });
});
