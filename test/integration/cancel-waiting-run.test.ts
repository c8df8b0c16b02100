import { afterEach, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, submit, type TaskHandler } from '../../host/kernel';
import type { CliContext } from '../../host/cli/context';
import { cancelRun } from '../../host/cli/commands/plan-run';
import { systemClock } from '../../host/support';
import { quietLogger, tempStore } from '../support/temp-store';

let t: ReturnType<typeof tempStore> | undefined;
const kernels: Kernel[] = [];
afterEach(async () => {
  for (const k of kernels.splice(0)) await k.stop();
  await t?.cleanup();
  t = undefined;
});

/**
 * One turn with two calls: one waits for approval (the run shows `awaiting_approval`), its sibling
 * is sending a `never` action that does not return before the host dies.
 */
function handlers(): TaskHandler[] {
  return [
    {
      kind: 'turn',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async () => ({ type: 'spawn', join: 'allSettled', phase: 'done', tasks: [{ kind: 'needs-approval', input: null }, { kind: 'send', input: null }] }),
        done: async () => ({ type: 'complete' }),
      },
    },
    {
      kind: 'needs-approval',
      version: 1,
      initialPhase: 'ask',
      phases: {
        ask: async () => ({ type: 'await', signal: 'approval', phase: 'decided', run: { to: 'awaiting_approval', reason: 'call waits for approval' } }),
        decided: async () => ({ type: 'complete' }),
      },
    },
    {
      kind: 'send',
      version: 1,
      initialPhase: 'send',
      phases: {
        send: async (ctx) => {
          const out = await ctx.perform({ id: `${ctx.task.runId}:email`, kind: 'email', intent: { to: 'a@example.com' }, replay: 'never' }, (signal) =>
            // The service is slow: the host dies while the request is out.
            new Promise<{ sent: true }>((_, reject) => signal.addEventListener('abort', () => reject(new Error('host stopping')), { once: true })),
          );
          return out.status === 'uncertain' ? { type: 'interrupt', reason: out.reason } : { type: 'complete' };
        },
      },
    },
  ];
}

function host(store: ReturnType<typeof tempStore>['store']) {
  const registry = new HandlerRegistry();
  for (const h of handlers()) registry.register(h);
  const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: quietLogger(), hostId: 'test-host', pollMs: 50 });
  kernels.push(kernel);
  return { store, registry, kernel };
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await probe();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('cancelling a run that waits for approval while a sibling call is sending', { timeout: 60_000 }, () => {
  it('goes through cancelling and, once the host died mid-send, ends in needs_reconciliation naming the effect, never cancelled', async () => {
    t = tempStore();
    const first = host(t.store);
    await first.kernel.start();
    const { run } = await submit(first, { requestId: 'r1', runKind: 'agent', root: { kind: 'turn', input: null } });
    await until('the run to wait for approval with the email executing', async () => {
      const r = await t!.store.getRun(run.id);
      const effects = await t!.store.listEffects({ runId: run.id });
      return r?.state === 'awaiting_approval' && effects.some((e) => e.status === 'executing');
    });

    const ctx = { store: t.store, json: true, clock: systemClock, hostId: 'test-host' } as unknown as CliContext;
    expect(await cancelRun(ctx, run.id)).toBe(0);
    // The cancel is recorded; the run is not final while the email may be on its way.
    expect((await t.store.getRun(run.id))!.state).toBe('cancelling');

    // The host dies before the send returns: its receipt is never committed.
    await first.kernel.stop();
    const second = host(t.store);
    await second.kernel.start();
    const settled = await second.kernel.waitForRun(run.id);
    expect(settled.state).toBe('needs_reconciliation');
    const effects = await t.store.listEffects({ runId: run.id });
    expect(effects.map((e) => e.status)).toEqual(['unknown']);
    const transitions = await t.store.listRunTransitions(run.id);
    expect(transitions.map((x) => x.to)).not.toContain('cancelled');
    expect(transitions.at(-1)!.reason).toContain(effects[0]!.id);
  });
});
