/**
 * The scripted job of the crash test, run as a child process:
 *   node --import tsx test/fault/scripted-job.ts DB SERVICE_URL
 * A root task spawns five subtasks (a sleeper, an allSettled group, a failFast group where one
 * child fails, and two single actions); every leaf performs an external action against the
 * effect service, some `safe`, some `never`. The same request id makes every restart continue
 * the same run. Prints one JSON line with the run state when the run settles.
 *
 * Every run of it makes the same commits (their order between concurrent tasks may differ, their
 * multiset may not): the crash test aims at the k-th commit of a label and must find it in every
 * run, on a loaded machine too. A task whose path depends on which of two concurrent commits lands
 * first has no place here, unless something in the job orders them (see `linger`).
 */
import { z } from 'zod';
import pino from 'pino';
import { openStore } from '../../host/store';
import { DocumentTypes, HandlerRegistry, Kernel, rejected, submit, type Decision, type SpawnSpec, type TaskHandler } from '../../host/kernel';
import { systemClock } from '../../host/support';

const [dbPath, serviceUrl] = process.argv.slice(2) as [string, string];

type ActInput = { label: string; replay: 'safe' | 'never'; fail?: boolean };

async function act(effectId: string, fail: boolean, signal: AbortSignal) {
  const res = await fetch(`${serviceUrl}/act`, { method: 'POST', body: JSON.stringify({ effectId, fail }), signal });
  // The service's contract: a request with `fail` is refused, not applied (so the effect is `failed`).
  if (!res.ok) throw rejected(`service answered ${res.status}`, { code: 'service_refused' });
  return (await res.json()) as { accepted: string };
}

const actHandler: TaskHandler = {
  kind: 'act',
  version: 1,
  initialPhase: 'call',
  phases: {
    // The intent is committed with the decision that leaves `call`, before anything is sent.
    call: async (ctx) => {
      const input = ctx.input as ActInput;
      return {
        type: 'next',
        phase: 'execute',
        writes: { effects: [{ id: `fx:${ctx.task.id}`, kind: 'http.act', intent: { label: input.label, fail: input.fail ?? false }, replay: input.replay }] },
      };
    },
    execute: async (ctx): Promise<Decision> => {
      const input = ctx.input as ActInput;
      const out = await ctx.perform({ id: `fx:${ctx.task.id}`, kind: 'http.act', intent: { label: input.label, fail: input.fail ?? false }, replay: input.replay }, (signal) =>
        act(`fx:${ctx.task.id}`, input.fail ?? false, signal),
      );
      if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason, result: { label: input.label, interrupted: true } };
      return { type: 'complete', result: { label: input.label } };
    },
  },
};

const sleepyHandler: TaskHandler = {
  kind: 'sleepy',
  version: 1,
  initialPhase: 'start',
  phases: {
    start: async (ctx) => ({ type: 'sleep', until: ctx.now() + 150, phase: 'spawn' }),
    spawn: async () => ({ type: 'spawn', join: 'allSettled', phase: 'end', tasks: [{ kind: 'act', input: { label: 'after-sleep', replay: 'safe' } }] }),
    end: async (ctx) => ({ type: 'complete', result: { slept: true, child: (await ctx.children())[0]!.outcome } }),
  },
};

const snoozeHandler: TaskHandler = {
  kind: 'snooze',
  version: 1,
  initialPhase: 'start',
  phases: { start: async (ctx) => ({ type: 'sleep', until: ctx.now() + 600_000, phase: 'start' }) },
};

/**
 * The failFast group's child that is still running when the group decides its result, in every
 * run: cancelled with its siblings when `fast-fails` fails, it ends only once its parent has left
 * `waiting`/`running`. The group therefore always goes through `completing` and settles
 * (`task.settled:group`). Without it, the group went straight to terminal or through `completing`
 * depending on whether the sleeping sibling's cancel committed before the group's decision read its
 * children: a boundary present in some runs only (issue 24). Driven by state, not by a delay.
 */
const lingerHandler: TaskHandler = {
  kind: 'linger',
  version: 1,
  initialPhase: 'hold',
  phases: {
    hold: async (ctx) => {
      await new Promise<void>((resolve) => (ctx.signal.aborted ? resolve() : ctx.signal.addEventListener('abort', () => resolve(), { once: true })));
      // The cancel came: wait for the parent's decision (bounded, so a bug shows as a divergence, not a hang).
      for (let i = 0; i < 3000; i++) {
        const parent = await ctx.store.getTask(ctx.task.parentId!);
        if (!parent || parent.status === 'completing' || parent.status === 'terminal') break;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw ctx.signal.reason;
    },
  },
};

const groupHandler: TaskHandler = {
  kind: 'group',
  version: 1,
  initialPhase: 'spawn',
  phases: {
    spawn: async (ctx) => {
      const { join } = ctx.input as { join: 'allSettled' | 'failFast' };
      const tasks: SpawnSpec[] =
        join === 'allSettled'
          ? [{ kind: 'act', input: { label: 'all-safe', replay: 'safe' } }, { kind: 'act', input: { label: 'all-never', replay: 'never' } }]
          : [{ kind: 'snooze', input: {} }, { kind: 'linger', input: {} }, { kind: 'act', input: { label: 'fast-fails', replay: 'never', fail: true } }];
      return { type: 'spawn', join, phase: 'end', tasks };
    },
    end: async (ctx) => {
      const outcomes = (await ctx.children()).map((c) => c.outcome);
      if (outcomes.includes('error')) return { type: 'fail', error: { code: 'group_failed', message: `children: ${outcomes.join(',')}` } };
      return { type: 'complete', result: { outcomes } };
    },
  },
};

const Summary = z.strictObject({ children: z.record(z.string(), z.string()) });
const SummaryOp = z.strictObject({ child: z.string(), outcome: z.string() });

const rootHandler: TaskHandler = {
  kind: 'job',
  version: 1,
  initialPhase: 'plan',
  phases: {
    plan: async () => ({ type: 'next', phase: 'spawn', writes: { documents: [{ documentId: 'summary', create: { type: 'summary' } }] } }),
    spawn: async (): Promise<Decision> => ({
      type: 'spawn',
      join: 'allSettled',
      phase: 'collect',
      tasks: [
        { kind: 'sleepy', input: {} },
        { kind: 'group', input: { join: 'allSettled' } },
        { kind: 'group', input: { join: 'failFast' } },
        { kind: 'act', input: { label: 'single-never', replay: 'never' } },
        { kind: 'act', input: { label: 'single-safe', replay: 'safe' } },
      ],
    }),
    collect: async (ctx) => {
      const children = await ctx.children();
      const names = ['sleepy', 'group-all', 'group-fast', 'single-never', 'single-safe'];
      return {
        type: 'complete',
        result: { outcomes: children.map((c) => c.outcome) },
        writes: { documents: children.map((c, i) => ({ documentId: 'summary', op: { child: names[i]!, outcome: c.outcome ?? 'none' } })) },
      };
    },
  },
};

// A SQLite file path or a postgres:// URL: the crash suite runs against both stores.
const store = await openStore(dbPath);
const registry = new HandlerRegistry();
const documents = new DocumentTypes();
documents.register({
  type: 'summary',
  state: Summary,
  op: SummaryOp,
  initial: { children: {} },
  apply: (s, op) => ({ children: { ...s.children, [op.child]: op.outcome } }),
});
for (const h of [actHandler, sleepyHandler, snoozeHandler, lingerHandler, groupHandler, rootHandler]) registry.register(h);
// One host id for every restart, as one machine's berth has: a restarted job sees that the killed
// one's process is gone and takes its session at once, without waiting for the lease to run out.
const kernel = new Kernel({ store, registry, documents, clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'crash-host', pollMs: 100 });
await kernel.start();
const { run } = await submit({ store, kernel, registry }, { requestId: 'crash-test-job', runKind: 'scripted', root: { kind: 'job', input: {} } });
const settled = await kernel.waitForRun(run.id);
await kernel.stop();
await store.close();
console.log(JSON.stringify({ runId: run.id, state: settled.state }));
