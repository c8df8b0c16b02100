import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { Worker } from '../../host/fleet';
import { DocumentTypes, HandlerRegistry, Kernel, submit } from '../../host/kernel';
import type { Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres);

const RUNS = 12;

function shortRuns(): HandlerRegistry {
  const registry = new HandlerRegistry();
  registry.register({
    kind: 'short',
    version: 1,
    initialPhase: 'a',
    phases: {
      a: async () => ({ type: 'next', phase: 'b', checkpoint: { a: true } }),
      b: async () => ({ type: 'complete', result: { ok: true } }),
    },
  });
  return registry;
}

/** `RUNS` short runs submitted to `store` by a kernel that claims nothing: the queue a worker finds. Their ids, in order. */
async function submitShortRuns(store: Store, registry: HandlerRegistry): Promise<string[]> {
  const submitter = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'submit', claim: 'none' });
  const ids: string[] = [];
  for (let i = 0; i < RUNS; i++) ids.push((await submit({ store, kernel: submitter, registry }, { requestId: `r${i}`, runKind: 'short', root: { kind: 'short', input: {} } })).run.id);
  return ids;
}

/** The store, with every call of the named methods counted. */
function counting(store: Store, names: string[]): { store: Store; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const counted = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== 'string' || typeof v !== 'function' || !names.includes(prop)) return v;
      return (...args: unknown[]) => {
        calls.set(prop, (calls.get(prop) ?? 0) + 1);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: counted, calls };
}

describe.each(STORE_KINDS)('a full worker (%s store)', (kind) => {
  it('refills a freed slot without reading each waiting run\'s session and owner, and releases every run it finished', { timeout: 60_000 }, async () => {
    const t = await tempStoreOf(kind);
    try {
      const registry = shortRuns();
      const ids = await submitShortRuns(t.store, registry);

      const { store, calls } = counting(await t.open(), ['getSession', 'getSessionOwner', 'claimSession']);
      const logger = pino({ level: 'silent' });
      const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger, hostId: 'w', claim: 'none', concurrency: 4, ownership: { leaseTtlMs: 30_000 } });
      // The timer's rounds never come in this test: every round is one a run-moving commit started.
      const worker = new Worker({ store, kernel, logger, hostId: 'w', pid: process.pid, concurrency: 2, tags: [], leaseTtlMs: 30_000, claimEveryMs: 600_000 });
      await worker.start();
      try {
        for (;;) {
          const done = await t.store.listRuns({ states: ['completed'] });
          if (done.length === RUNS) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        for (;;) {
          if (kernel.ownedSessions().length === 0) break;
          await new Promise((r) => setTimeout(r, 20));
        }
      } finally {
        await worker.drain(0);
      }
      // Each run's session read once (its tags), no owner read: nobody died, so no run is a take-over.
      expect(calls.get('getSessionOwner') ?? 0).toBe(0);
      expect(calls.get('getSession') ?? 0).toBeLessThanOrEqual(RUNS);
      expect(calls.get('claimSession')).toBe(RUNS);
      for (const id of ids) {
        const run = (await t.store.getRun(id))!;
        expect((await t.store.getSessionOwner(run.sessionId))?.stoppedAt, 'released at its end').not.toBeNull();
      }
    } finally {
      await t.cleanup();
    }
  });

  it('claims the runs for its free slots together, not one claim after another (each claim a flushed write the next one waited for)', { timeout: 60_000 }, async () => {
    const t = await tempStoreOf(kind);
    try {
      const registry = shortRuns();
      await submitShortRuns(t.store, registry);
      const inner = await t.open();
      // Claims and releases in flight at once, at most.
      const most = { claimSession: 0, releaseSession: 0 };
      const now = { claimSession: 0, releaseSession: 0 };
      const store = new Proxy(inner, {
        get(target, prop, receiver) {
          const v = Reflect.get(target, prop, receiver) as unknown;
          if (typeof v !== 'function' || (prop !== 'claimSession' && prop !== 'releaseSession')) return v;
          return async (...args: unknown[]) => {
            most[prop] = Math.max(most[prop], ++now[prop]);
            try {
              return await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            } finally {
              now[prop]--;
            }
          };
        },
      });
      const logger = pino({ level: 'silent' });
      const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger, hostId: 'w', claim: 'none', concurrency: 8, ownership: { leaseTtlMs: 30_000 } });
      const worker = new Worker({ store, kernel, logger, hostId: 'w', pid: process.pid, concurrency: 4, tags: [], leaseTtlMs: 30_000, claimEveryMs: 600_000 });
      await worker.start();
      try {
        while ((await t.store.listRuns({ states: ['completed'] })).length < RUNS) await new Promise((r) => setTimeout(r, 20));
        while (kernel.ownedSessions().length > 0) await new Promise((r) => setTimeout(r, 20));
      } finally {
        await worker.drain(0);
      }
      // The first round alone has 4 free slots and 12 candidates: its claims go out together.
      expect(most.claimSession, 'claims in flight at once').toBeGreaterThanOrEqual(2);
      expect(most.claimSession, 'never more than the free slots').toBeLessThanOrEqual(4);
      const owners = await t.store.listSessionOwners();
      expect(owners.length, 'every run claimed once').toBe(RUNS);
      expect(owners.filter((o) => o.stoppedAt === null), 'every claim released').toEqual([]);
    } finally {
      await t.cleanup();
    }
  });

  it('start() returns after the first round while runs keep moving, and a drain then stops the claims (berth worker heeded SIGTERM only once the queue was empty)', { timeout: 60_000 }, async () => {
    const t = await tempStoreOf(kind);
    try {
      const registry = shortRuns();
      await submitShortRuns(t.store, registry);
      const store = await t.open();
      const logger = pino({ level: 'silent' });
      const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger, hostId: 'w', claim: 'none', concurrency: 4, ownership: { leaseTtlMs: 30_000 } });
      // A busy store, made certain: every round ends only once a run moved since the last round
      // ended (so each round asks for one more), until no run is left to move.
      let moves = 0;
      let movesSeen = 0;
      kernel.onCommit((e) => void (e.runIds.length > 0 && moves++));
      const unfinished = async () => (await t.store.listRuns({ states: ['completed'] })).length < RUNS;
      // A run moves only while the worker owns it: a round of the draining worker, which claims no
      // more, would otherwise wait here for ever once its last runs ended (claims made together end
      // their runs sooner, and the test hung so at times).
      const onTick = async () => {
        while (moves === movesSeen && kernel.ownedSessions().length > 0 && (await unfinished())) await new Promise((r) => setTimeout(r, 5));
        movesSeen = moves;
      };
      const worker = new Worker({ store, kernel, logger, hostId: 'w', pid: process.pid, concurrency: 2, tags: [], leaseTtlMs: 30_000, claimEveryMs: 600_000, onTick });
      await worker.start();
      const completedAtStart = (await t.store.listRuns({ states: ['completed'] })).length;
      await worker.drain(0);
      expect(completedAtStart, 'runs completed when start() returned').toBeLessThan(RUNS);
      const owners = await t.store.listSessionOwners();
      expect(owners.length, 'sessions ever claimed: none after the drain').toBeLessThan(RUNS);
      expect(owners.filter((o) => o.stoppedAt === null), 'every claim released by the drain').toEqual([]);
    } finally {
      await t.cleanup();
    }
  });

  it('a worker\'s beat reads its own hosts row, not the row of every worker process the store ever recorded (200 stopped ones here)', { timeout: 60_000 }, async () => {
    const t = await tempStoreOf(kind);
    try {
      // A row per worker process (host:pid) is kept after it stops: a fleet that restarts its workers only adds rows.
      for (let pid = 1; pid <= 200; pid++) {
        await t.store.heartbeatHost({ id: `old:${pid}`, hostId: 'old', pid, tags: [], concurrency: 1 });
        await t.store.stopHost(`old:${pid}`);
      }
      let rows = 0;
      const store = new Proxy(await t.open(), {
        get(target, prop, receiver) {
          const v = Reflect.get(target, prop, receiver) as unknown;
          if (typeof v !== 'function' || (prop !== 'listHosts' && prop !== 'getHost')) return v;
          return async (...args: unknown[]) => {
            const out = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            rows += Array.isArray(out) ? out.length : out ? 1 : 0;
            return out;
          };
        },
      });
      const logger = pino({ level: 'silent' });
      const kernel = new Kernel({ store, registry: shortRuns(), documents: new DocumentTypes(), clock: systemClock, logger, hostId: 'w', claim: 'none', ownership: { leaseTtlMs: 30_000 } });
      const worker = new Worker({ store, kernel, logger, hostId: 'w', pid: process.pid, concurrency: 1, tags: [], leaseTtlMs: 30_000, claimEveryMs: 600_000 });
      // The start's round beats and asks whether an operator asked this worker to drain.
      await worker.start();
      await worker.drain(0);
      expect(rows).toBe(1);
    } finally {
      await t.cleanup();
    }
  });
});
