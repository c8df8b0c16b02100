import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import { systemClock } from '../../host/support';
import type { Store } from '../../host/store';
import { tempStore } from '../support/temp-store';

// A real SQLite store whose reads are refused for a while, as a busy store refuses them under load
// (SQLITE_BUSY after the busy timeout): the host must wait it out, not end mid-run.
let t: ReturnType<typeof tempStore> | undefined;
let kernel: Kernel | undefined;
afterEach(async () => {
  await kernel?.stop();
  await t?.cleanup();
  kernel = undefined;
  t = undefined;
});

function busyFor(store: Store, refuse: () => boolean): Store {
  const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
  return {
    ...store,
    getRun: async (id) => {
      if (refuse()) throw busy();
      return store.getRun(id);
    },
    listTasks: async (f) => {
      if (refuse()) throw busy();
      return store.listTasks(f);
    },
  };
}

describe('a host on a store that refuses reads for a while', () => {
  it('keeps driving and still sees the run settle: no unhandled rejection, no stuck wait', async () => {
    t = tempStore();
    const rejections: unknown[] = [];
    const onRejection = (r: unknown) => rejections.push(r);
    process.on('unhandledRejection', onRejection);
    try {
      let refusing = false;
      const store = busyFor(t.store, () => refusing);
      const registry = new HandlerRegistry();
      registry.register({
        kind: 'slow',
        version: 1,
        initialPhase: 'start',
        phases: {
          start: async () => {
            // The store turns busy while the phase runs, so polls and the run watch hit it.
            refusing = true;
            await new Promise((r) => setTimeout(r, 600));
            refusing = false;
            return { type: 'complete', result: { ok: true } };
          },
        },
      });
      kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'busy-host', pollMs: 50 });
      await kernel.start();
      const { run } = await submit({ kernel, store, registry }, { requestId: 'busy', runKind: 'test', root: { kind: 'slow', input: {} } });
      const settled = await Promise.race([kernel.waitForRun(run.id), new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 10_000))]);
      expect(settled === 'stuck' ? 'stuck' : settled.state).toBe('completed');
      await new Promise((r) => setTimeout(r, 100));
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });
});
