import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import type { CommitInput, CommitResult, Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { STORE_KINDS, stopSharedPostgres } from '../support/store-kinds';
import { storeWithKernels } from '../support/store-kernels';

afterAll(stopSharedPostgres, 60_000);

const waitFor = async (what: string, cond: () => Promise<boolean>, ms = 30_000) => {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

/** A store whose commits are recorded with their answers: which compare-and-sets were refused. */
function recording(store: Store): { store: Store; refused: Array<{ label: string; conflict: unknown }> } {
  const refused: Array<{ label: string; conflict: unknown }> = [];
  const wrapped = Object.assign(Object.create(store) as Store, {
    commit: async (input: CommitInput): Promise<CommitResult> => {
      const r = await store.commit(input);
      if (!r.ok) refused.push({ label: input.label, conflict: r.conflict });
      return r;
    },
  });
  return { store: wrapped, refused };
}

/**
 * A parent that spawns one child and waits for it; the child holds in its phase until the test
 * opens the gate. The parent's `after` phase returns the checkpoint it was woken with, so the run's
 * result shows which row of the parent the kernel decided on.
 */
function registry(gate: Promise<void>): HandlerRegistry {
  const r = new HandlerRegistry();
  r.register({
    kind: 'parent',
    version: 1,
    initialPhase: 'start',
    phases: {
      start: async () => ({ type: 'spawn', tasks: [{ kind: 'child', input: {} }], join: 'allSettled', phase: 'after', checkpoint: { by: 'kernel' } }),
      after: async (ctx) => ({ type: 'complete', result: ctx.checkpoint }),
    },
  });
  r.register({
    kind: 'child',
    version: 1,
    initialPhase: 'run',
    phases: {
      run: async () => {
        await gate;
        return { type: 'complete', result: { ok: true } };
      },
    },
  });
  return r;
}

const silent = pino({ level: 'silent' });

describe.each(STORE_KINDS)('a kernel keeps the rows its own commits wrote, on %s', (kind) => {
  const fixture = storeWithKernels(kind);
  const kernels = fixture.kernels;

  it('after another writer committed to its session (an operator\'s raw store commit), it reads the task again and never decides on its kept row', async () => {
    const t = await fixture.store();
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const reg = registry(gate);
    const { store, refused } = recording(t.store);
    // No poll during the test: what the kernel knows comes from its commits and its reads.
    const kernel = new Kernel({ store, registry: reg, documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h1', pollMs: 600_000 });
    kernels.push(kernel);
    await kernel.start();
    const { run } = await submit({ store, kernel, registry: reg }, { requestId: 'r1', runKind: 'test', root: { kind: 'parent', input: {} } });
    const parentId = run.rootTaskId!;
    await waitFor('the child to run', async () => (await t.store.listTasks({ parentId })).some((c) => c.status === 'running'));
    const parent = (await t.store.getTask(parentId))!;
    expect(parent.status).toBe('waiting');
    // Another program changes the waiting parent (an unfenced compare-and-set, as an operator's decision is).
    const op = await t.store.commit({ sessionId: run.sessionId, label: 'operator.note', actor: 'user:op', taskTransitions: [{ taskId: parentId, expectVersion: parent.version, set: { checkpoint: { by: 'operator' } } }] });
    expect(op.ok).toBe(true);
    open();
    const done = await kernel.waitForRun(run.id, { signal: AbortSignal.timeout(30_000) });
    expect(done.state).toBe('completed');
    expect((await t.store.getTask(parentId))!.result).toEqual({ by: 'operator' });
    // The child's end may carry the parent's wake built from the kept row (parent-wake.ts): the
    // parent's version refuses it once, and the child's decision is committed alone. Nothing else.
    expect(refused.filter((r) => !(r.label === 'phase.complete:child' && (r.conflict as { kind: string; taskId?: string }).taskId === parentId))).toEqual([]);
    expect(refused.length).toBeLessThanOrEqual(1);
  });

  it('after another host took its session over and committed, it reads the task again under its new claim and never decides on a row of its old epoch', async () => {
    const t = await fixture.store();
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const reg = registry(gate);
    const first = recording(t.store);
    // Renewals every 50 ms: the first host learns of the take-over from a renewal, not from a refused commit.
    const k1 = new Kernel({ store: first.store, registry: reg, documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h1', pollMs: 600_000, heartbeatMs: 50 });
    kernels.push(k1);
    await k1.start();
    const { run } = await submit({ store: first.store, kernel: k1, registry: reg }, { requestId: 'r1', runKind: 'test', root: { kind: 'parent', input: {} } });
    const parentId = run.rootTaskId!;
    await waitFor('the child to run', async () => (await t.store.listTasks({ parentId })).some((c) => c.status === 'running'));
    const lost = new Promise<void>((r) => k1.onSessionLost(() => r()));

    // A second host takes the session over (an operator's take-over), changes the parent and gives the session up.
    const other = await t.open();
    const k2 = new Kernel({ store: other, registry: new HandlerRegistry(), documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h2', claim: 'none', pollMs: 600_000 });
    kernels.push(k2);
    expect((await k2.claim(run.sessionId, { takeOver: true })).ok).toBe(true);
    const parent = (await other.getTask(parentId))!;
    const note = await k2.commit({ sessionId: run.sessionId, label: 'operator.note', taskTransitions: [{ taskId: parentId, expectVersion: parent.version, set: { checkpoint: { by: 'second host' } } }] });
    expect(note.ok).toBe(true);
    await k2.release(run.sessionId);

    // The first host's renewal is refused: it stops all work on the session (its child's phase commits nothing).
    await lost;
    open();
    // It claims the session again (released, so free) and drives it to the end under its new epoch.
    expect((await k1.claim(run.sessionId)).ok).toBe(true);
    const done = await k1.waitForRun(run.id, { signal: AbortSignal.timeout(30_000) });
    expect(done.state).toBe('completed');
    expect((await t.store.getTask(parentId))!.result).toEqual({ by: 'second host' });
    expect(first.refused).toEqual([]);
  });

  it('a kernel that lost a session whose task sleeps past its wake time forgets that sleeper: it reads the store at its poll, not in a loop', async () => {
    const t = await fixture.store();
    const reg = new HandlerRegistry();
    reg.register({ kind: 'waits', version: 1, initialPhase: 'a', phases: { a: async () => ({ type: 'await', signal: 'never', phase: 'a' }) } });
    reg.register({
      kind: 'naps',
      version: 1,
      initialPhase: 'a',
      phases: { a: async (ctx) => ({ type: 'sleep', until: ctx.now() + 60_000, phase: 'b' }), b: async () => ({ type: 'complete' }) },
    });
    let reads = 0;
    const counted = new Proxy(t.store, {
      get(target, prop) {
        const v = (target as unknown as Record<string | symbol, unknown>)[prop];
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if (prop !== 'commit' && prop !== 'renewSession') reads++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    }) as Store;
    // The first kernel's clock is the test's: it jumps past the nap's wake time once the session is lost.
    let skew = 0;
    const clock = { now: () => Date.now() + skew };
    const k1 = new Kernel({ store: counted, registry: reg, documents: new DocumentTypes(), clock, logger: silent, hostId: 'h1', pollMs: 250, heartbeatMs: 50 });
    kernels.push(k1);
    await k1.start();
    // One session it keeps (a task waiting for a signal that never comes), one it will lose while its task sleeps.
    await submit({ store: counted, kernel: k1, registry: reg }, { requestId: 'keep', runKind: 'test', root: { kind: 'waits', input: {} } });
    const { run } = await submit({ store: counted, kernel: k1, registry: reg }, { requestId: 'lose', runKind: 'test', root: { kind: 'naps', input: {} } });
    await waitFor('the nap', async () => (await t.store.getTask(run.rootTaskId!))?.status === 'sleeping');
    const lost = new Promise<void>((r) => k1.onSessionLost(() => r()));
    const other = await t.open();
    const k2 = new Kernel({ store: other, registry: new HandlerRegistry(), documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h2', claim: 'none', pollMs: 600_000 });
    kernels.push(k2);
    expect((await k2.claim(run.sessionId, { takeOver: true })).ok).toBe(true);
    await lost;
    // Past the lost task's wake time: the first kernel has nothing of that session to wake.
    skew = 120_000;
    await new Promise((r) => setTimeout(r, 500));
    const before = reads;
    await new Promise((r) => setTimeout(r, 1000));
    // A poll every 250 ms costs a few reads; a timer re-armed at once for a past wake time costs hundreds.
    expect(reads - before).toBeLessThan(60);
    expect((await t.store.getTask(run.rootTaskId!))!.status).toBe('sleeping');
  });
});
