import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { submit, type TaskHandler } from '../../host/kernel';
import { tempKernel } from '../support/temp-store';

let k: ReturnType<typeof tempKernel>;
afterEach(async () => {
  await k?.cleanup();
});

const complete = (kind: string, result: unknown = { ok: true }): TaskHandler => ({
  kind,
  version: 1,
  initialPhase: 'start',
  phases: { start: async () => ({ type: 'complete', result: result as never }) },
});

async function run(kind: string, requestId = `req-${Math.random()}`) {
  return submit(k, { requestId, runKind: 'test', root: { kind, input: {} } });
}

describe('kernel scheduler', () => {
  it('returns the original submission and run when the same request id is submitted twice', async () => {
    k = tempKernel();
    k.registry.register(complete('noop'));
    await k.kernel.start();
    const a = await run('noop', 'same');
    const b = await run('noop', 'same');
    expect(a.created).toBe(true);
    expect(b.created).toBe(false);
    expect(b.submission.id).toBe(a.submission.id);
    expect(b.run.id).toBe(a.run.id);
    expect(await k.store.listRuns()).toHaveLength(1);
  });

  it('walks phases in order, keeping checkpoint data, and completes the run', async () => {
    k = tempKernel();
    k.registry.register({
      kind: 'steps',
      version: 1,
      initialPhase: 'a',
      phases: {
        a: async () => ({ type: 'next', phase: 'b', checkpoint: { seen: ['a'] } }),
        b: async (ctx) => ({ type: 'next', phase: 'c', checkpoint: { seen: [...(ctx.checkpoint as { seen: string[] }).seen, 'b'] } }),
        c: async (ctx) => ({ type: 'complete', result: ctx.checkpoint }),
      },
    });
    await k.kernel.start();
    const { run: r } = await run('steps');
    const done = await k.kernel.waitForRun(r.id);
    expect(done.state).toBe('completed');
    const root = await k.store.getTask(r.rootTaskId!);
    expect(root).toMatchObject({ status: 'terminal', outcome: 'ok', result: { seen: ['a', 'b'] } });
    expect((await k.store.listRunTransitions(r.id)).map((t) => t.to)).toEqual(['admitted', 'running', 'completed']);
  });

  it('wakes an allSettled parent only after every child settles, with their results readable', async () => {
    k = tempKernel();
    k.registry.register({
      kind: 'child',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async (ctx) => {
          const n = (ctx.input as { n: number }).n;
          if (n === 2) return { type: 'fail', error: { code: 'boom', message: 'child 2 fails' } };
          return { type: 'sleep', until: ctx.now() + 30 * n, phase: 'done' };
        },
        done: async (ctx) => ({ type: 'complete', result: (ctx.input as { n: number }).n * 10 }),
      },
    });
    k.registry.register({
      kind: 'parent',
      version: 1,
      initialPhase: 'spawn',
      phases: {
        spawn: async () => ({ type: 'spawn', join: 'allSettled', phase: 'collect', tasks: [1, 2, 3].map((n) => ({ kind: 'child', input: { n } })) }),
        collect: async (ctx) => ({ type: 'complete', result: (await ctx.children()).map((c) => [c.outcome, c.result]) as never }),
      },
    });
    await k.kernel.start();
    const { run: r } = await run('parent');
    expect((await k.kernel.waitForRun(r.id)).state).toBe('completed');
    expect((await k.store.getTask(r.rootTaskId!))?.result).toEqual([['ok', 10], ['error', null], ['ok', 30]]);
  });

  it('with failFast, wakes the parent on the first failure and cancels the siblings still running', async () => {
    k = tempKernel();
    k.registry.register({
      kind: 'c',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async (ctx) =>
          (ctx.input as { fail: boolean }).fail
            ? { type: 'fail', error: { code: 'x', message: 'fails' } }
            : { type: 'sleep', until: ctx.now() + 60_000, phase: 'start' },
      },
    });
    k.registry.register({
      kind: 'p',
      version: 1,
      initialPhase: 'spawn',
      phases: {
        spawn: async () => ({ type: 'spawn', join: 'failFast', phase: 'after', tasks: [{ kind: 'c', input: { fail: false } }, { kind: 'c', input: { fail: true } }] }),
        after: async () => ({ type: 'fail', error: { code: 'group_failed', message: 'a child failed' } }),
      },
    });
    await k.kernel.start();
    const { run: r } = await run('p');
    const done = await k.kernel.waitForRun(r.id);
    expect(done.state).toBe('failed');
    const children = await k.store.listTasks({ parentId: r.rootTaskId! });
    expect(children.map((c) => c.outcome)).toEqual(['cancelled', 'error']);
    expect((await k.store.listRunTransitions(r.id)).map((t) => t.to)).toEqual(['admitted', 'running', 'compensating', 'failed']);
  });

  it('keeps a sleeping task asleep across a host restart and wakes it at its time', async () => {
    k = tempKernel();
    const handler: TaskHandler = {
      kind: 'sleeper',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async (ctx) => ({ type: 'sleep', until: ctx.now() + 400, phase: 'wake' }),
        wake: async (ctx) => ({ type: 'complete', result: { wokeAt: ctx.now() } }),
      },
    };
    k.registry.register(handler);
    await k.kernel.start();
    const { run: r } = await run('sleeper');
    await k.kernel.waitForRun(r.id, { states: ['running'] });
    while ((await k.store.getTask(r.rootTaskId!))?.status !== 'sleeping') await new Promise((res) => setTimeout(res, 10));
    const wakeAt = await k.kernel.nextWakeAt();
    expect(wakeAt).not.toBeNull();
    await k.kernel.stop();

    const { Kernel } = await import('../../host/kernel');
    const again = new Kernel({ store: k.store, registry: k.registry, documents: k.documents, clock: { now: () => Date.now() }, logger: (await import('../support/temp-store')).quietLogger(), hostId: 'h2', pollMs: 50 });
    await again.start();
    try {
      expect((await again.waitForRun(r.id)).state).toBe('completed');
      const woke = ((await k.store.getTask(r.rootTaskId!))?.result as { wokeAt: number }).wokeAt;
      expect(woke).toBeGreaterThanOrEqual(wakeAt!);
    } finally {
      await again.stop();
    }
  });

  it('cancels durably: a running phase is signalled, owned subtasks settle, then the task is cancelled', async () => {
    k = tempKernel();
    let signalled = false;
    k.registry.register({
      kind: 'blocker',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: (ctx) =>
          new Promise((resolve) =>
            ctx.signal.addEventListener('abort', () => {
              signalled = true;
              resolve({ type: 'next', phase: 'start' });
            }),
          ),
      },
    });
    k.registry.register({
      kind: 'owner',
      version: 1,
      initialPhase: 'spawn',
      phases: {
        spawn: async () => ({ type: 'spawn', join: 'allSettled', phase: 'end', tasks: [{ kind: 'blocker', input: {} }, { kind: 'blocker', input: {} }] }),
        end: async () => ({ type: 'complete' }),
      },
    });
    await k.kernel.start();
    const { run: r } = await run('owner');
    while ((await k.store.listTasks({ parentId: r.rootTaskId!, statuses: ['running'] })).length < 2) await new Promise((res) => setTimeout(res, 10));
    await k.kernel.commit({ sessionId: r.sessionId, label: 'run.cancel', runTransitions: [{ runId: r.id, from: 'running', to: 'cancelling', actor: 'user:test', reason: 'test' }], cancelTasks: [r.rootTaskId!] });
    const done = await k.kernel.waitForRun(r.id);
    expect(done.state).toBe('cancelled');
    expect(signalled).toBe(true);
    const all = await k.store.listTasks({ runId: r.id });
    expect(all.every((t) => t.status === 'terminal' && t.outcome === 'cancelled')).toBe(true);
  });

  it('leaves a task of an unknown kind version blocked with its state untouched, and runs it once a handler appears', async () => {
    k = tempKernel();
    k.registry.register(complete('versioned'));
    await k.kernel.start();
    const { run: r } = await run('versioned');
    await k.kernel.waitForRun(r.id);
    // A task saved by a newer release: version 2 has no handler here.
    await k.kernel.commit({ sessionId: r.sessionId, label: 'seed', tasks: [{ id: 'task_v2', runId: null, parentId: null, kind: 'versioned', kindVersion: 2, phase: 'start', input: { x: 1 } }] });
    let task = await k.store.getTask('task_v2');
    for (let i = 0; i < 50 && !task?.blockedReason; i++) {
      await new Promise((res) => setTimeout(res, 10));
      task = await k.store.getTask('task_v2');
    }
    expect(task).toMatchObject({ status: 'pending', phase: 'start', input: { x: 1 }, blockedReason: 'no handler for versioned@2 (registered versions: 1)' });
    k.registry.register({ ...complete('versioned', 'v2 ran'), version: 2 });
    for (let i = 0; i < 100 && task?.status !== 'terminal'; i++) {
      await new Promise((res) => setTimeout(res, 10));
      task = await k.store.getTask('task_v2');
    }
    expect(task).toMatchObject({ status: 'terminal', outcome: 'ok', result: 'v2 ran', blockedReason: null });
  });

  it('counts a restart for a task found running at start-up and fails it at the limit with the reason', async () => {
    k = tempKernel();
    k.registry.register({ ...complete('fragile'), restartLimit: 2 });
    const { store } = k;
    await store.commit({ sessionId: 's', label: 'seed', createSession: {}, runs: [{ id: 'run_f', kind: 't', submissionId: null, rootTaskId: 'task_f', versions: {} }], tasks: [{ id: 'task_f', runId: 'run_f', parentId: null, kind: 'fragile', kindVersion: 1, phase: 'start', input: {}, status: 'running' }] });
    await store.commit({ sessionId: 's', label: 'seed2', taskTransitions: [{ taskId: 'task_f', expectVersion: 1, set: { restarts: 2 } }], runTransitions: [{ runId: 'run_f', from: 'admitted', to: 'running', actor: 't', reason: 't' }] });
    await k.kernel.start();
    const done = await k.kernel.waitForRun('run_f');
    expect(done.state).toBe('failed');
    const task = await store.getTask('task_f');
    expect(task).toMatchObject({ status: 'terminal', outcome: 'error', restarts: 3, error: { code: 'restart_limit' } });
    expect(task?.error?.message).toContain('phase start');
  });

  it('never runs more phases at once than the concurrency limit', async () => {
    k = tempKernel({ concurrency: 2 });
    let now = 0;
    let peak = 0;
    let finished = 0;
    k.registry.register({
      kind: 'busy',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async () => {
          peak = Math.max(peak, ++now);
          // Each phase stays in flight until a second one runs beside it (or none is left to): on a
          // loaded machine a fixed 30 ms could end before the next phase's start commit was flushed.
          const until = Date.now() + 20_000;
          while (now < 2 && finished + now < 6 && Date.now() < until) await new Promise((res) => setTimeout(res, 10));
          await new Promise((res) => setTimeout(res, 30));
          now--;
          finished++;
          return { type: 'complete' };
        },
      },
    });
    k.registry.register({
      kind: 'fan',
      version: 1,
      initialPhase: 'spawn',
      phases: {
        spawn: async () => ({ type: 'spawn', join: 'allSettled', phase: 'end', tasks: Array.from({ length: 6 }, () => ({ kind: 'busy', input: {} })) }),
        end: async () => ({ type: 'complete' }),
      },
    });
    await k.kernel.start();
    const { run: r } = await run('fan');
    expect((await k.kernel.waitForRun(r.id)).state).toBe('completed');
    expect(peak).toBe(2);
  });

  it('parks a task on an outside signal, moving the run, and resumes it in the awaited phase with the payload', async () => {
    k = tempKernel();
    k.registry.register({
      kind: 'asker',
      version: 1,
      initialPhase: 'ask',
      phases: {
        ask: async () => ({ type: 'await', signal: 'operator', phase: 'answered', checkpoint: { asked: true }, run: { to: 'needs_reconciliation', reason: 'digest mismatch in /workspace' } }),
        answered: async (ctx) => ({ type: 'complete', result: ctx.checkpoint }),
      },
    });
    await k.kernel.start();
    const { run: r } = await run('asker');
    const parked = await k.kernel.waitForRun(r.id);
    expect(parked.state).toBe('needs_reconciliation');
    expect((await k.store.listRunTransitions(r.id)).at(-1)?.reason).toBe('digest mismatch in /workspace');
    expect(await k.kernel.deliver(r.rootTaskId!, 'other', {})).toBe(false);
    const delivered = await k.kernel.deliver(r.rootTaskId!, 'operator', { action: 'accept' }, {
      actor: 'user:ops',
      runTransitions: [{ runId: r.id, from: 'needs_reconciliation', to: 'reconciling', actor: 'user:ops', reason: 'accept' }],
    });
    expect(delivered).toBe(true);
    expect(await k.kernel.deliver(r.rootTaskId!, 'operator', { action: 'accept' })).toBe(false);
    while ((await k.store.getTask(r.rootTaskId!))?.status !== 'terminal') await new Promise((res) => setTimeout(res, 10));
    expect((await k.store.getTask(r.rootTaskId!))?.result).toEqual({ asked: true, operator: { action: 'accept' } });
    expect((await k.store.getRun(r.id))?.state).toBe('completed');
  });
});

describe('a long-lived kernel (a worker, berth mcp)', () => {
  it('holds nothing of the runs it drove once their sessions are released: no kept rows, no listener per wait on its own or the caller\'s signal', async () => {
    k = tempKernel();
    k.registry.register({
      kind: 'three',
      version: 1,
      initialPhase: 'a',
      phases: { a: async () => ({ type: 'next', phase: 'b', checkpoint: { at: 'a' } }), b: async () => ({ type: 'complete', result: { ok: true } }) },
    });
    await k.kernel.start();
    const callerLives = new AbortController();
    for (let i = 0; i < 30; i++) {
      const { run: r } = await run('three');
      // Half the waits with the caller's long-lived signal, half with none (the kernel's own only).
      expect((await k.kernel.waitForRun(r.id, i % 2 ? { signal: callerLives.signal } : {})).state).toBe('completed');
      await k.kernel.release(r.sessionId);
    }
    // Before: each wait left its listener on the kernel's signal (30 here, ~8 KB of closures each in a
    // process that lives for days), and the released sessions' task rows stayed kept.
    expect(getEventListeners(k.kernel.stopped, 'abort')).toHaveLength(0);
    expect(getEventListeners(callerLives.signal, 'abort')).toHaveLength(0);
    expect(k.kernel.held()).toEqual({ owned: 0, keptSessions: 0, keptTasks: 0 });
  });

  it('still ends a wait with host_stopped when it stops, and a caller\'s abort with the caller\'s reason', async () => {
    k = tempKernel();
    k.registry.register({ kind: 'parked', version: 1, initialPhase: 'a', phases: { a: async () => ({ type: 'await', signal: 'go', phase: 'a' }) } });
    await k.kernel.start();
    const { run: r } = await run('parked');
    const caller = new AbortController();
    const byCaller = k.kernel.waitForRun(r.id, { signal: caller.signal, states: ['completed'] });
    caller.abort(new Error('client left'));
    await expect(byCaller).rejects.toThrow('client left');
    const byStop = k.kernel.waitForRun(r.id, { states: ['completed'] });
    await k.kernel.stop();
    await expect(byStop).rejects.toMatchObject({ code: 'host_stopped' });
    expect(getEventListeners(k.kernel.stopped, 'abort')).toHaveLength(0);
  });
});
