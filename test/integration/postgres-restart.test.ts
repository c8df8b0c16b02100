import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel, submit, type Decision, type TaskHandler } from '../../host/kernel';
import { openPostgresStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { startEffectService } from '../support/effect-service';
import { startPostgres, type TestPostgres } from '../support/postgres';

// The database server itself goes away under a busy host: an immediate stop (as a crash) and a
// start on the same data, while ten runs are in their phases and effects.
let pgc: TestPostgres;
let service: Awaited<ReturnType<typeof startEffectService>>;
beforeAll(async () => {
  pgc = await startPostgres();
  service = await startEffectService();
}, 120_000);
afterAll(async () => {
  await service?.close();
  await pgc?.stop();
}, 60_000);

const STEPS = 12;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Steps with a pause each, a `never` action to the counting service halfway, then more steps. */
const job: TaskHandler = {
  kind: 'job',
  version: 1,
  initialPhase: 'step',
  phases: {
    step: async (ctx): Promise<Decision> => {
      const n = ((ctx.checkpoint as { n?: number } | null)?.n ?? 0) + 1;
      await sleep(150);
      if (n === STEPS / 2) return { type: 'next', phase: 'act', checkpoint: { n } };
      if (n >= STEPS) return { type: 'complete', result: { steps: n } };
      return { type: 'next', phase: 'step', checkpoint: { n } };
    },
    act: async (ctx): Promise<Decision> => {
      const id = `fx:${ctx.task.id}`;
      const out = await ctx.perform({ id, kind: 'http.act', intent: { task: ctx.task.id }, replay: 'never' }, async (signal) => {
        const res = await fetch(`${service.url}/act`, { method: 'POST', body: JSON.stringify({ effectId: id, fail: false }), signal });
        return (await res.json()) as { accepted: string };
      });
      if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason, result: { interrupted: true } };
      return { type: 'next', phase: 'step', checkpoint: ctx.checkpoint };
    },
  },
};

describe('PostgreSQL restarted under ten running runs', { timeout: 300_000 }, () => {
  it('every run completes or waits for reconciliation; none is lost, none duplicated, no never action sent twice', async () => {
    const url = await pgc.createStoreDatabase('restart');
    const store = await openPostgresStore(url);
    const registry = new HandlerRegistry();
    registry.register(job);
    const logged: string[] = [];
    const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) }), hostId: 'pg-restart', pollMs: 100, concurrency: 10 });
    try {
      await kernel.start();
      const runs: Array<import('../../host/model').Run> = [];
      for (let i = 0; i < 10; i++) runs.push((await submit({ store, kernel, registry }, { requestId: `req-${i}`, runKind: 'test', root: { kind: 'job', input: {} } })).run);
      // Wait until every run is past its first steps, then take the server down for a while.
      const progressed = async () => (await Promise.all(runs.map((r) => store.getTask(r.rootTaskId!)))).every((t) => ((t?.checkpoint as { n?: number } | null)?.n ?? 0) >= 2);
      while (!(await progressed())) await sleep(50);
      await pgc.restart({ downMs: 1500 });
      const ends = await Promise.all(runs.map((r) => kernel.waitForRun(r.id, { states: ['completed', 'needs_reconciliation', 'failed'] })));
      const states = ends.map((r) => r.state);
      console.log(`restart under 10 runs: ${states.filter((s) => s === 'completed').length} completed, ${states.filter((s) => s === 'needs_reconciliation').length} need reconciliation`);
      expect(states.every((s) => s === 'completed' || s === 'needs_reconciliation')).toBe(true);
      // The outage was felt: the host met the dead server (and carried on) rather than sleeping through it.
      expect(logged.some((l) => l.includes('store_unavailable'))).toBe(true);
      // None lost, none duplicated: ten submissions, ten runs, one root task each.
      expect((await store.listRuns()).map((r) => r.id).sort()).toEqual(runs.map((r) => r.id).sort());
      const counts = service.counts();
      for (const r of ends) {
        const tasks = await store.listTasks({ runId: r.id });
        expect(tasks).toHaveLength(1);
        const [effect] = await store.listEffects({ runId: r.id });
        expect(counts[effect!.id] ?? 0).toBeLessThanOrEqual(1);
        if (r.state === 'completed') {
          expect(tasks[0]).toMatchObject({ outcome: 'ok', result: { steps: STEPS } });
          expect(effect).toMatchObject({ status: 'confirmed' });
          expect(counts[effect!.id]).toBe(1);
        } else {
          // Only an action the restart caught in flight holds a run for the operator.
          expect(effect!.status).toBe('unknown');
        }
        const seqs = (await store.listCommits(r.sessionId)).map((c) => c.seq);
        expect(seqs).toEqual(seqs.map((_, i) => i + 1));
      }
    } finally {
      await kernel.stop();
      await store.close();
    }
  });
});
