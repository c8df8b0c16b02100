import { afterEach, describe, expect, it } from 'vitest';
import { acceptanceOf, decideAcceptance, decideAcceptanceOnce } from '../../host/acceptance';
import { emptyCost, HostConfigSchema, priceOf, PriceTableSchema } from '../../host/cost';
import { isBerthError } from '../../host/errors';
import { tempStore } from '../support/temp-store';

let t: ReturnType<typeof tempStore> | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

/** A run in `state`, created and moved through real commits. */
async function runIn(store: ReturnType<typeof tempStore>['store'], id: string, path: Array<'running' | 'completed'>) {
  const sessionId = `ses_${id}`;
  await store.commit({ sessionId, label: 'test.run', createSession: {}, runs: [{ id, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
  let from = 'admitted' as const as string;
  for (const to of path) {
    const r = await store.commit({ sessionId, label: 'test.move', runTransitions: [{ runId: id, from: from as never, to, actor: 'test', reason: 'test' }] });
    expect(r.ok).toBe(true);
    from = to;
  }
  return (await store.getRun(id))!;
}

describe('acceptance records', () => {
  it('records an operator decision once per request id, keeps every decision, and never moves the run', async () => {
    t = tempStore();
    const run = await runIn(t.store, 'run_a', ['running', 'completed']);
    expect((await acceptanceOf(t.store, run)).state).toBe('pending');
    const first = await decideAcceptance(t.store, { runId: run.id, decision: 'rejected', actor: 'user:ann', reason: 'wrong output', requestId: 'r1' });
    const again = await decideAcceptance(t.store, { runId: run.id, decision: 'rejected', actor: 'user:ann', reason: 'wrong output', requestId: 'r1' });
    expect([first.repeated, again.repeated]).toEqual([false, true]);
    expect(again.decision.id).toBe(first.decision.id);
    await decideAcceptance(t.store, { runId: run.id, decision: 'accepted', actor: 'user:bob', reason: null, requestId: 'r2' });
    expect((await t.store.listAcceptance({ runId: run.id })).map((d) => [d.decision, d.actor])).toEqual([['rejected', 'user:ann'], ['accepted', 'user:bob']]);
    expect((await acceptanceOf(t.store, run)).state).toBe('accepted');
    expect((await t.store.getRun(run.id))!.state).toBe('completed');
  });

  it('records one decision for the same click sent many times at once, refusing the others as already_decided, and still takes a decision that changes the acceptance', async () => {
    t = tempStore();
    const run = await runIn(t.store, 'run_c', ['running', 'completed']);
    const click = () => decideAcceptanceOnce(t!.store, { runId: run.id, decision: 'accepted', actor: 'user:ann', reason: null }).then((d) => d.id, (e: unknown) => (isBerthError(e) ? e.code : String(e)));
    const answers = await Promise.all(Array.from({ length: 10 }, click));
    expect(answers.filter((a) => a.startsWith('acc_'))).toHaveLength(1);
    expect(answers.filter((a) => a === 'already_decided')).toHaveLength(9);
    expect(await click()).toBe('already_decided');
    await decideAcceptanceOnce(t.store, { runId: run.id, decision: 'rejected', actor: 'user:ann', reason: 'no' });
    expect(await click()).toMatch(/^acc_/);
    expect((await t.store.listAcceptance({ runId: run.id })).map((d) => d.decision)).toEqual(['accepted', 'rejected', 'accepted']);
  });

  it('refuses a run that is not completed (still running) and a request id reused for another decision', async () => {
    t = tempStore();
    const running = await runIn(t.store, 'run_f', ['running']);
    const done = await runIn(t.store, 'run_d', ['running', 'completed']);
    const code = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (isBerthError(e) ? e.code : String(e)));
    expect(await code(decideAcceptance(t.store, { runId: running.id, decision: 'accepted', actor: 'user:ann', reason: null, requestId: 'x1' }))).toBe('run_not_completed');
    expect((await acceptanceOf(t.store, running)).state).toBe('none');
    await decideAcceptance(t.store, { runId: done.id, decision: 'accepted', actor: 'user:ann', reason: null, requestId: 'x2' });
    expect(await code(decideAcceptance(t.store, { runId: done.id, decision: 'rejected', actor: 'user:ann', reason: 'no', requestId: 'x2' }))).toBe('request_id_reused');
    expect(await t.store.listAcceptance({})).toHaveLength(1);
  });
});

describe('cost samples and prices', () => {
  it('sums samples per run, meter and key', async () => {
    t = tempStore();
    await t.store.recordCost({ runId: 'r1', at: 1, key: 'gpt', meters: { 'tokens.prompt': 10, 'model.requests': 1 } });
    await t.store.recordCost({ runId: 'r1', at: 2, key: 'gpt', meters: { 'tokens.prompt': 5, 'model.requests': 1 } });
    await t.store.recordCost({ runId: 'r2', at: 3, key: 'lease_1', meters: { 'cpu.usec': 1_500_000 } });
    expect(await t.store.sumCost({ runIds: ['r1'] })).toEqual([
      { runId: 'r1', meter: 'model.requests', key: 'gpt', amount: 2 },
      { runId: 'r1', meter: 'tokens.prompt', key: 'gpt', amount: 15 },
    ]);
    expect((await t.store.sumCost()).map((s) => s.runId)).toEqual(['r1', 'r1', 'r2']);
    expect((await t.store.listCost({ runId: 'r1' })).map((s) => [s.at, s.meter, s.amount])).toEqual([[1, 'tokens.prompt', 10], [1, 'model.requests', 1], [2, 'tokens.prompt', 5], [2, 'model.requests', 1]]);
  });

  it('prices cached prompt tokens at their own price, CPU per hour and snapshots per GB-month', () => {
    const prices = PriceTableSchema.parse({ tokens: { default: { prompt: 1, completion: 2, cached: 0.5 } }, perCpuHour: 36, perGbMonth: 10 });
    const c = { ...emptyCost(), tokens: { m: { requests: 1, prompt: 1000, completion: 500, cached: 400 } }, cpuSeconds: 100, snapshotGbMonths: 0.5 };
    const p = priceOf(c, prices);
    expect(p.tokens).toBeCloseTo(0.6 + 0.2 + 1, 9);
    expect(p.cpu).toBeCloseTo(1, 9);
    expect(p.storage).toBeCloseTo(5, 9);
    expect(p.total).toBeCloseTo(7.8, 9);
  });

  it('names the bad field of a host config', () => {
    const r = HostConfigSchema.safeParse({ prices: { perCpuHour: 'cheap', tokens: { default: { prompt: 1 } } } });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path.join('.')).sort()).toEqual(['prices.perCpuHour', 'prices.tokens.default.completion']);
  });
});
