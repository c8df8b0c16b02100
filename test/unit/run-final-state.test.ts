import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CommitInput } from '../../host/store';
import { runResumeTransition } from '../../host/agent/approval-run-state';
import { tempStore } from '../support/temp-store';

let t: ReturnType<typeof tempStore>;
beforeEach(() => {
  t = tempStore();
});
afterEach(async () => {
  await t.cleanup();
});

const sessionId = 'ses_1';
const base = (extra: Partial<CommitInput> = {}): CommitInput => ({ sessionId, label: 'test', ...extra });

/** A running run with its root task and one effect in `status`. */
async function runWithEffect(status: 'executing' | 'unknown' | 'intended') {
  expect((await t.store.commit(base({
    createSession: {},
    runs: [{ id: 'run_1', kind: 'agent', submissionId: null, rootTaskId: 'root', versions: { kernel: '0.1.0' } }],
    tasks: [
      { id: 'root', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: null },
      { id: 'tool', runId: 'run_1', parentId: 'root', kind: 'k', kindVersion: 1, phase: 'p', input: null },
    ],
    effects: [{ id: 'fx_send', create: { runId: 'run_1', taskId: 'tool', kind: 'email', intent: { to: 'a' }, replay: 'never' }, ...(status === 'intended' ? {} : { set: { status } }) }],
    runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 't', reason: 'start' }],
  }))).ok).toBe(true);
}

describe('a run reaches a final state only when none of its effects may still be happening', () => {
  it.each(['executing', 'unknown'] as const)('refuses cancelled and failed while an effect is %s, inside the commit', async (status) => {
    await runWithEffect(status);
    const cancel = await t.store.commit(base({ runTransitions: [
      { runId: 'run_1', from: 'running', to: 'cancelling', actor: 't', reason: 'cancel' },
      { runId: 'run_1', from: 'cancelling', to: 'cancelled', actor: 't', reason: 'cancelled' },
    ] }));
    expect(cancel).toEqual({ ok: false, conflict: { kind: 'unresolved_effects', runId: 'run_1', effectIds: ['fx_send'] } });
    const fail = await t.store.commit(base({ runTransitions: [
      { runId: 'run_1', from: 'running', to: 'compensating', actor: 't', reason: 'error' },
      { runId: 'run_1', from: 'compensating', to: 'failed', actor: 't', reason: 'failed' },
    ] }));
    expect(fail).toEqual({ ok: false, conflict: { kind: 'unresolved_effects', runId: 'run_1', effectIds: ['fx_send'] } });
    expect((await t.store.getRun('run_1'))!.state).toBe('running');
    // Settling the effect in the same commit is what lets the run end.
    const settled = await t.store.commit(base({
      effects: [{ id: 'fx_send', expectStatus: status, set: { status: 'failed', error: { code: 'operator_rejected', message: 'did not happen' } } }],
      runTransitions: [
        { runId: 'run_1', from: 'running', to: 'cancelling', actor: 't', reason: 'cancel' },
        { runId: 'run_1', from: 'cancelling', to: 'cancelled', actor: 't', reason: 'cancelled' },
      ],
    }));
    expect(settled.ok).toBe(true);
  });

  it('lets a run with an effect that never started (intended) be cancelled', async () => {
    await runWithEffect('intended');
    const r = await t.store.commit(base({ runTransitions: [
      { runId: 'run_1', from: 'running', to: 'cancelling', actor: 't', reason: 'cancel' },
      { runId: 'run_1', from: 'cancelling', to: 'cancelled', actor: 't', reason: 'cancelled' },
    ] }));
    expect(r.ok).toBe(true);
  });
});

describe('two approvals of one run decided at once', () => {
  it('leave the run running when one is approved while the other expires (the sibling check is inside the commit)', async () => {
    const waiting = (id: string) => ({ id, runId: 'run_1', parentId: 'root', kind: 'tool', kindVersion: 1, phase: 'approved', input: null, status: 'waiting' as const });
    expect((await t.store.commit(base({
      createSession: {},
      runs: [{ id: 'run_1', kind: 'agent', submissionId: null, rootTaskId: 'root', versions: { kernel: '0.1.0' } }],
      tasks: [{ id: 'root', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: null }, waiting('call_a'), waiting('call_b')],
      runTransitions: [
        { runId: 'run_1', from: 'admitted', to: 'running', actor: 't', reason: 'start' },
        { runId: 'run_1', from: 'running', to: 'awaiting_approval', actor: 't', reason: 'two calls wait' },
      ],
    }))).ok).toBe(true);
    const wait = { join: 'allSettled' as const, children: [], phase: 'approved', signal: 'approval' };
    for (const id of ['call_a', 'call_b']) {
      expect((await t.store.commit(base({ taskTransitions: [{ taskId: id, expectVersion: 1, set: { wait } }] }))).ok).toBe(true);
    }
    const a = (await t.store.getTask('call_a'))!;
    const b = (await t.store.getTask('call_b'))!;
    // Both deciders look at the store before either commits: each sees the other still waiting.
    const [forA, forB] = await Promise.all([
      runResumeTransition(t.store, a, 'user:op approved', 'user:op'),
      runResumeTransition(t.store, b, 'approval expired', 'policy:approval-expiry'),
    ]);
    const decide = (task: typeof a, runTransitions: typeof forA) =>
      t.store.commit(base({ taskTransitions: [{ taskId: task.id, expectVersion: task.version, set: { status: 'running', wait: null } }], runTransitions }));
    expect((await decide(a, forA)).ok).toBe(true);
    expect((await decide(b, forB)).ok).toBe(true);
    const tasks = await t.store.listTasks({ runId: 'run_1', statuses: ['waiting'] });
    expect(tasks.filter((x) => x.wait?.signal === 'approval')).toEqual([]);
    expect((await t.store.getRun('run_1'))!.state).toBe('running');
  });
});
