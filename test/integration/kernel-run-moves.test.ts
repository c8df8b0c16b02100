import pino from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, notSent, submit } from '../../host/kernel';
import type { CommitInput, CommitResult, Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

const CHILDREN = 4;
const MAX_RETRIES = 2;
const silent = pino({ level: 'silent' });

/** Every commit the kernel asked for, with its answer: which were refused and why. */
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
 * A root that fans out to CHILDREN tasks of one run. Each child sends under an effect whose service
 * refuses the connection (never sent), and all of them meet at a barrier before each attempt, so
 * their phases throw, ask for `retry_wait` and commit at the same moment: each decision is built
 * from the run as it was before any of them moved it.
 */
function fanOut(counts: { sends: number; verifies: number }): HandlerRegistry {
  const arrived = new Map<number, number>();
  const r = new HandlerRegistry();
  r.register({
    kind: 'fan',
    version: 1,
    initialPhase: 'start',
    phases: {
      start: async () => ({ type: 'spawn', tasks: Array.from({ length: CHILDREN }, (_, i) => ({ kind: 'send', input: { i } })), join: 'allSettled', phase: 'after' }),
      after: async () => ({ type: 'fail', error: { code: 'not_sent', message: 'the service was down' } }),
    },
  });
  r.register({
    kind: 'send',
    version: 1,
    initialPhase: 'send',
    maxRetries: MAX_RETRIES,
    phases: {
      send: async (ctx) => {
        const round = ctx.task.attempts;
        arrived.set(round, (arrived.get(round) ?? 0) + 1);
        const until = Date.now() + 30_000;
        while ((arrived.get(round) ?? 0) < CHILDREN && Date.now() < until) await new Promise((res) => setTimeout(res, 2));
        const out = await ctx.perform(
          {
            id: `send:${(ctx.input as { i: number }).i}`,
            kind: 'test.send',
            intent: {},
            replay: 'verify',
            // The service is down: asking about an earlier attempt fails too (what left the notify example's email unknown).
            verify: async () => {
              counts.verifies++;
              throw new Error('connect ECONNREFUSED (lookup)');
            },
          },
          async () => {
            counts.sends++;
            throw notSent('connect ECONNREFUSED');
          },
        );
        return out.status === 'done' ? { type: 'complete', result: out.receipt } : { type: 'interrupt', reason: out.reason };
      },
    },
  });
  return r;
}

describe.each(STORE_KINDS)('tasks of one run asking for retry_wait at the same moment (%s store)', (kind) => {
  let t: Awaited<ReturnType<typeof tempStoreOf>> | undefined;
  let kernel: Kernel | undefined;
  afterEach(async () => {
    await kernel?.stop();
    kernel = undefined;
    await t?.cleanup();
    t = undefined;
  });

  it('each commits its decision with its effect back to intended (the run already in retry_wait is no conflict), so no refused send is ever taken for one that may have arrived', async () => {
    t = await tempStoreOf(kind);
    const counts = { sends: 0, verifies: 0 };
    const reg = fanOut(counts);
    const { store, refused } = recording(t.store);
    kernel = new Kernel({ store, registry: reg, documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h1', concurrency: CHILDREN + 1 });
    await kernel.start();
    const { run } = await submit({ store, kernel, registry: reg }, { requestId: 'fan', runKind: 'test', root: { kind: 'fan', input: {} } });
    const end = await kernel.waitForRun(run.id);

    const effects = await t.store.listEffects({ runId: run.id });
    expect(effects.map((e) => `${e.id}:${e.status}:${e.attempts}`).sort()).toEqual(Array.from({ length: CHILDREN }, (_, i) => `send:${i}:failed:${MAX_RETRIES + 1}`));
    expect(counts).toEqual({ sends: CHILDREN * (MAX_RETRIES + 1), verifies: 0 });
    // The only refusals are of a run move read before another task moved the run; each was built again and committed.
    expect(refused.filter((r) => (r.conflict as { kind: string }).kind !== 'run_state')).toEqual([]);
    expect(end.state).toBe('failed');
    const moves = (await t.store.listRunTransitions(run.id)).map((m) => `${m.from}->${m.to}`);
    expect(moves).toContain('running->retry_wait');
    expect(moves).toContain('retry_wait->running');
  }, 120_000);
});
