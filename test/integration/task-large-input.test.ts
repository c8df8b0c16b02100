import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import { INLINE_INPUT_BYTES, TASK_READ_COLUMNS } from '../../host/store/task-inputs';
import { systemClock } from '../../host/support';
import { rawSql, STORE_KINDS, stopSharedPostgres } from '../support/store-kinds';
import { storeWithKernels } from '../support/store-kernels';

afterAll(stopSharedPostgres, 60_000);

const silent = pino({ level: 'silent' });

/** A root whose input is a long plan (as a 3,000-step plan's is): it spawns `steps` children one at a time and records what it read of its input at each. */
function walker(): HandlerRegistry {
  const r = new HandlerRegistry();
  r.register({
    kind: 'walker',
    version: 1,
    initialPhase: 'next',
    phases: {
      next: async (ctx) => {
        const input = ctx.input as { steps: string[] };
        const at = ((ctx.checkpoint as { at?: number } | null)?.at ?? 0);
        const seen = [...((ctx.checkpoint as { seen?: number[] } | null)?.seen ?? []), input.steps.length];
        if (at >= 5) return { type: 'complete', result: { seen, last: input.steps.at(-1)! } };
        return { type: 'spawn', tasks: [{ kind: 'step', input: { index: at } }], join: 'allSettled', phase: 'next', checkpoint: { at: at + 1, seen } };
      },
    },
  });
  r.register({ kind: 'step', version: 1, initialPhase: 'run', phases: { run: async () => ({ type: 'complete', result: { ok: true } }) } });
  return r;
}

const longInput = () => ({ steps: Array.from({ length: 3000 }, (_, i) => `  - { name: s${i}, run: "echo ${i}", replay: safe }`) });

describe.each(STORE_KINDS)('a task whose input is too long to read with its row (%s store)', (kind) => {
  const fixture = storeWithKernels(kind);
  const kernels = fixture.kernels;

  it('is answered whole by every read (by id, listed, paged, newest, the commit that moved it) and on a second handle that never read it, while the rows leave it out', async () => {
    const t = await fixture.store();
    const reg = walker();
    const kernel = new Kernel({ store: t.store, registry: reg, documents: new DocumentTypes(), clock: systemClock, logger: silent, hostId: 'h1' });
    kernels.push(kernel);
    await kernel.start();
    const input = longInput();
    expect(JSON.stringify(input).length).toBeGreaterThan(INLINE_INPUT_BYTES);
    const { run } = await submit({ store: t.store, kernel, registry: reg }, { requestId: 'r1', runKind: 'test', root: { kind: 'walker', input } });
    const done = await kernel.waitForRun(run.id, { signal: AbortSignal.timeout(60_000) });
    expect(done.state).toBe('completed');
    const rootId = run.rootTaskId!;
    // Every phase of the root (six, each after a commit that moved it) read the whole plan.
    expect((await t.store.getTask(rootId))!.result).toEqual({ seen: [3000, 3000, 3000, 3000, 3000, 3000], last: input.steps.at(-1) });

    for (const store of [t.store, await t.open()]) {
      expect((await store.getTask(rootId))!.input).toEqual(input);
      expect((await store.listTasks({ runId: run.id })).find((x) => x.id === rootId)!.input).toEqual(input);
      expect((await store.listTasks({ runId: run.id, page: { offset: 0, limit: 1 } }))[0]!.input).toEqual(input);
      expect((await store.listTasks({ sessionId: run.sessionId, newest: 7 }))[0]!.input).toEqual(input);
      const children = await store.listTasks({ parentId: rootId });
      expect(children.map((c) => c.input)).toEqual([0, 1, 2, 3, 4].map((index) => ({ index })));
    }
    // A commit's answer carries the input too.
    const root = (await t.store.getTask(rootId))!;
    const moved = await t.store.commit({ sessionId: run.sessionId, label: 'operator.note', actor: 'user:op', taskTransitions: [{ taskId: rootId, expectVersion: root.version, set: { blockedReason: 'note' } }] });
    expect(moved.ok && moved.tasks!.find((x) => x.id === rootId)!.input).toEqual(input);
    // The stored text is the input as written; only what a read answers leaves it out.
    const stored = await rawSql(t.store, `SELECT length(input_json) AS n FROM tasks WHERE id = '${rootId}'`);
    expect(Number(stored[0]!.n)).toBe(JSON.stringify(input).length);
    const read = await rawSql(t.store, `SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE run_id = '${run.id}'`);
    expect(read.filter((r) => r.input_json === null).map((r) => r.id)).toEqual([rootId]);
  });
});
