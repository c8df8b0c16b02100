import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import { openSqliteStore } from '../../host/store';
import { quietLogger } from '../support/temp-store';

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

describe('owned subtasks under a clock that steps backwards', () => {
  it('lists children in the order they were spawned, so children().at(-1) is the newest even after the clock stepped back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-clock-'));
    // The clock is set back an hour after the first child is spawned (an NTP correction):
    // the second child's created_at is older than the first's.
    let offset = 0;
    const clock = { now: () => Date.now() + offset };
    const store = openSqliteStore(join(dir, 'berth.db'), { clock });
    const registry = new HandlerRegistry();
    const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock, logger: quietLogger(), hostId: 'clock-host', pollMs: 20 });
    cleanup = async () => {
      await kernel.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    };
    const lastSeen: string[] = [];
    registry.register({ kind: 'child', version: 1, initialPhase: 'go', phases: { go: async (ctx) => ({ type: 'complete', result: ctx.input }) } });
    registry.register({
      kind: 'parent',
      version: 1,
      initialPhase: 'first',
      phases: {
        first: async () => ({ type: 'spawn', join: 'allSettled', phase: 'second', tasks: [{ kind: 'child', input: { n: 1 } }] }),
        second: async (ctx) => {
          lastSeen.push(JSON.stringify((await ctx.children()).at(-1)!.input));
          offset -= 3_600_000;
          return { type: 'spawn', join: 'allSettled', phase: 'done', tasks: [{ kind: 'child', input: { n: 2 } }] };
        },
        done: async (ctx) => {
          const kids = await ctx.children();
          lastSeen.push(JSON.stringify(kids.at(-1)!.input));
          return { type: 'complete', result: { order: kids.map((c) => (c.input as { n: number }).n) } };
        },
      },
    });
    await kernel.start();
    const { run } = await submit({ store, kernel, registry }, { requestId: 'clock-req', runKind: 'test', root: { kind: 'parent', input: {} } });
    const done = await kernel.waitForRun(run.id);
    expect(done.state).toBe('completed');
    const kids = await store.listTasks({ parentId: run.rootTaskId! });
    // The clock did step back: the second child looks older than the first.
    const byN = (n: number) => kids.find((t) => (t.input as { n: number }).n === n)!;
    expect(byN(2).createdAt).toBeLessThan(byN(1).createdAt);
    expect(lastSeen).toEqual(['{"n":1}', '{"n":2}']);
    expect((await store.getTask(run.rootTaskId!))!.result).toEqual({ order: [1, 2] });
  });
});
