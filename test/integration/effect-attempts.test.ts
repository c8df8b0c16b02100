import pino from 'pino';
import { z } from 'zod';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createTaskHost, defineTask, extension, type Extension } from '../../host/agent/custom-tasks';
import { exportRun } from '../../host/record';
import { openStore, type Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { httpEmailClient } from '../../examples/notify/email-client';
import { startEmailService } from '../support/email-service';
import { invariantGuard } from '../support/invariant-check';
import { newStoreLocation, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

const cleanups: Array<() => Promise<void> | void> = [];
const stores: string[] = [];
afterEach(async () => {
  // berth check --all over every store a test made (the fixtures' hook for application programs).
  for (const location of stores.splice(0)) {
    const broken = await invariantGuard().check(location);
    if (broken) throw broken;
  }
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(stopSharedPostgres);

const Input = z.strictObject({ operationId: z.string() });

/** One email under a fixed logical effect id, with the replay policy the test names. */
function mailExtension(serviceUrl: string, replay: 'never' | 'verify'): Extension {
  const email = httpEmailClient(serviceUrl);
  const send = defineTask({
    kind: 'send-one',
    input: Input,
    initialPhase: 'send',
    maxRetries: 1,
    phases: {
      send: async (ctx) => {
        const { operationId } = ctx.value;
        const out = await ctx.perform<{ messageId: string }>(
          {
            id: `mail:${operationId}`,
            kind: 'email.send',
            intent: { operationId },
            replay,
            ...(replay === 'verify'
              ? {
                  verify: async (_e, signal) => {
                    const found = await email.lookup(operationId, signal);
                    return found.found ? { done: true, receipt: { messageId: found.messageId } } : { done: false };
                  },
                }
              : {}),
          },
          (signal) => email.send({ operationId, to: 'ops@example.com', subject: 's', body: 'b' }, signal),
        );
        if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason };
        return { type: 'complete', result: { messageId: out.receipt.messageId } };
      },
    },
  });
  return extension('mail', { tasks: [send] });
}

async function world(kind: StoreKind) {
  const loc = await newStoreLocation(kind);
  const svc = await startEmailService();
  const store: Store = await openStore(loc.location);
  cleanups.push(loc.cleanup, () => svc.close(), () => store.close());
  stores.push(loc.location);
  const runOnce = async (replay: 'never' | 'verify', requestId: string) => {
    const host = createTaskHost({ store, clock: systemClock, logger: pino({ level: 'silent' }), hostId: `attempts-${requestId}`, extensions: [mailExtension(svc.url, replay)] });
    await host.kernel.start();
    try {
      const { run } = await host.start({ kind: 'send-one', input: { operationId: 'op-1' }, requestId });
      return await host.kernel.waitForRun(run.id);
    } finally {
      await host.kernel.stop();
    }
  };
  return { store, svc, runOnce };
}

describe.each(STORE_KINDS)('effect attempts (%s store)', (kind) => {
  it('a never effect that failed unsent and was sent afresh by a later run keeps the failed attempts and their errors, stays in the first run\'s record, and berth check passes', async () => {
    const w = await world(kind);
    await w.svc.down();
    const first = await w.runOnce('never', 'first');
    expect(first.state).toBe('failed');
    await w.svc.up();
    const second = await w.runOnce('never', 'second');
    expect(second.state).toBe('completed');
    expect(w.svc.counts().accepted).toEqual({ 'op-1': 1 });

    // Before: the row moved to the second run and the first run's record lost the effect its failure came from.
    const { record } = await exportRun(w.store, first.id, Date.now());
    const held = record.effects.find((e) => e.id === 'mail:op-1');
    expect(held, 'the first run\'s record holds the effect').toMatchObject({ runId: second.id, status: 'confirmed' });
    expect(held!.attemptLog.filter((a) => a.runId === first.id).map((a) => a.outcome)).toEqual(['not_applied', 'not_applied']);
    const effect = (await w.store.getEffect('mail:op-1'))!;
    expect(effect).toMatchObject({ status: 'confirmed', runId: second.id, attempts: 3 });
    // Before: the fresh attempt cleared the error, so retry_same_effect called this run a blind repeat.
    expect(effect.attemptLog.map((a) => [a.id, a.runId, a.outcome, a.settledBy])).toEqual([
      ['mail:op-1#1', first.id, 'not_applied', 'reply'],
      ['mail:op-1#2', first.id, 'not_applied', 'reply'],
      ['mail:op-1#3', second.id, 'applied', 'reply'],
    ]);
    for (const a of effect.attemptLog.slice(0, 2)) expect(a.error).toMatchObject({ delivery: 'not_sent' });
    for (const a of effect.attemptLog) {
      expect(a.epoch).toEqual(expect.any(Number));
      expect(a.endedAt).toBeGreaterThanOrEqual(a.startedAt!);
    }

    const own = await exportRun(w.store, second.id, Date.now());
    expect(own.record.effects.map((e) => [e.id, e.reconciliation])).toEqual([['mail:op-1', 'receipt']]);
  }, 120_000);

  it('an email accepted and then dropped is settled by a status query, and the record says so instead of calling it a receipt', async () => {
    const w = await world(kind);
    w.svc.fault('op-1', 'drop');
    const run = await w.runOnce('verify', 'dropped');
    expect(run.state).toBe('completed');
    expect(w.svc.counts().sendCalls).toEqual({ 'op-1': 1 });
    const { record } = await exportRun(w.store, run.id, Date.now());
    // Before: `receipt`, as if the service had answered the send.
    expect(record.effects.map((e) => e.reconciliation)).toEqual(['verify_query']);
    const effect = (await w.store.getEffect('mail:op-1'))!;
    expect(effect.attemptLog.map((a) => [a.n, a.outcome, a.settledBy])).toEqual([[1, 'applied', 'status_query']]);
  }, 120_000);
});
