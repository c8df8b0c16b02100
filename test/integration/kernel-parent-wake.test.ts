import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import { systemClock } from '../../host/support';
import { STORE_KINDS, stopSharedPostgres } from '../support/store-kinds';
import { storeWithKernels } from '../support/store-kernels';

afterAll(stopSharedPostgres, 60_000);

const silent = pino({ level: 'silent' });

/** A parent that spawns `children` children and waits for them; its `after` phase reports what it was woken with. */
function registry(children: number): HandlerRegistry {
  const r = new HandlerRegistry();
  r.register({
    kind: 'parent',
    version: 1,
    initialPhase: 'start',
    phases: {
      start: async () => ({ type: 'spawn', tasks: Array.from({ length: children }, (_, i) => ({ kind: 'child', input: { i } })), join: 'allSettled', phase: 'after' }),
      after: async (ctx) => ({ type: 'complete', result: { children: (await ctx.children()).map((c) => c.status) } }),
    },
  });
  r.register({ kind: 'child', version: 1, initialPhase: 'run', phases: { run: async () => ({ type: 'complete', result: { ok: true } }) } });
  return r;
}

describe.each(STORE_KINDS)('a parent waiting for its children, on %s', (kind) => {
  const fixture = storeWithKernels(kind);

  async function runOf(children: number) {
    const t = await fixture.store();
    const reg = registry(children);
    const kernel = new Kernel({ store: t.store, registry: reg, documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h1', pollMs: 600_000 });
    fixture.kernels.push(kernel);
    await kernel.start();
    const { run } = await submit({ store: t.store, kernel, registry: reg }, { requestId: 'r1', runKind: 'test', root: { kind: 'parent', input: {} } });
    const done = await kernel.waitForRun(run.id, { signal: AbortSignal.timeout(30_000) });
    const labels = (await t.store.listCommits(run.sessionId)).map((c) => c.label);
    const root = (await t.store.getTask(run.rootTaskId!))!;
    return { done, labels, root };
  }

  it('wakes in its only child\'s final commit: no wake commit of its own, and its next phase sees the child ended', async () => {
    const { done, labels, root } = await runOf(1);
    expect(done.state).toBe('completed');
    expect(root.result).toEqual({ children: ['terminal'] });
    expect(labels.filter((l) => l.startsWith('task.wake'))).toEqual([]);
    expect(labels.filter((l) => l.startsWith('phase.'))).toEqual(['phase.spawn:parent', 'phase.complete:child', 'phase.complete:parent']);
  });

  it('waiting for three children, wakes once in a commit of its own after the last one ended', async () => {
    const { done, labels, root } = await runOf(3);
    expect(done.state).toBe('completed');
    expect(root.result).toEqual({ children: ['terminal', 'terminal', 'terminal'] });
    expect(labels.filter((l) => l === 'task.wake:parent')).toHaveLength(1);
    expect(labels.indexOf('task.wake:parent')).toBeGreaterThan(labels.lastIndexOf('phase.complete:child'));
  });
});
