import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { EnvironmentSchema } from '../../environment';
import { defineTask } from '../../host/agent/custom-tasks';
import { submit } from '../../host/kernel';
import type { Json } from '../../host/model';
import { approvalTimerHandler } from '../../host/agent/approval-timer';
import type { AgentDeps } from '../../host/agent/agent-deps';
import { planHandlers } from '../../host/plan/handlers';
import type { RunSandbox } from '../../host/run-sandbox';
import { tempKernel } from '../support/temp-store';

let k: ReturnType<typeof tempKernel> | undefined;
afterEach(async () => {
  await k?.cleanup();
  k = undefined;
});

/** A plan run's input as submit stores it: one step, a minimal environment. */
const planInput = () => ({
  planFile: '/nowhere/plan.yaml',
  plan: { environment: 'env.yaml', steps: [{ name: 'only', run: 'true', replay: 'safe', env: {}, secrets: [], allowFailure: false }] },
  environment: EnvironmentSchema.parse({ kernel: { name: 'berth', version: '0.1.0', compatible: '^0.1.0' }, image: { ref: 'berth/tiny:latest' } }),
  envFingerprint: 'fp',
  workspaceDir: null,
}) as unknown as Json;

/**
 * The plan kinds with a sandbox that no phase here may reach: a drifted shape must be refused
 * before the phase touches the sandbox.
 */
const untouchable = new Proxy({}, { get: (_t, name) => { throw new Error(`the sandbox was used (${String(name)})`); } }) as RunSandbox;

/** Rewrites a stored task row as an older (or broken) host version might have left it. */
function rewriteTask(path: string, taskId: string, set: { checkpoint: unknown }) {
  const db = new Database(path);
  try {
    db.prepare('UPDATE tasks SET checkpoint_json = ? WHERE id = ?').run(JSON.stringify(set.checkpoint), taskId);
  } finally {
    db.close();
  }
}

describe('typed task kinds parse their stored shapes at the phase boundary', () => {
  it('fails a plan task whose stored checkpoint drifted with checkpoint_invalid naming the kind, phase and field, before the phase runs', async () => {
    k = tempKernel();
    const [plan, step] = planHandlers(untouchable, () => {});
    // The real plan kind, except that its first phase only waits, so the test can rewrite the stored row.
    k.registry.register({ ...plan!, phases: { ...plan!.phases, prepare: async () => ({ type: 'await', signal: 'go', phase: 'stepped' }) } });
    k.registry.register(step!);
    await k.kernel.start();
    const { run } = await submit(k, { requestId: 'drift-cp', runKind: 'plan', root: { kind: 'plan', input: planInput() } });
    while (!(await k.store.getTask(run.rootTaskId!))!.wait) await new Promise((r) => setTimeout(r, 20));
    // `index` renamed to `step`, as a version of the code that wrote it might have.
    rewriteTask(k.path, run.rootTaskId!, { checkpoint: { step: 0, generation: 0 } });
    expect(await k.kernel.deliver(run.rootTaskId!, 'go', true)).toBe(true);
    const done = await k.kernel.waitForRun(run.id);
    expect(done.state).toBe('failed');
    const root = (await k.store.getTask(run.rootTaskId!))!;
    expect(root.error).toMatchObject({ code: 'checkpoint_invalid', details: { kind: 'plan', phase: 'stepped', fields: ['index'] } });
    expect(root.error!.message).toContain('plan checkpoint in phase stepped: index:');
  });

  it('fails a plan step task whose stored input drifted with input_invalid naming the field, not an undefined step deep in the phase', async () => {
    k = tempKernel();
    for (const h of planHandlers(untouchable, () => {})) k.registry.register(h);
    // A plan task that spawns its step with the input shape of another version (`idx` for `index`).
    k.registry.register(defineTask({
      kind: 'drift-root',
      input: z.unknown(),
      initialPhase: 'spawn',
      phases: {
        spawn: async () => ({ type: 'spawn', join: 'allSettled', phase: 'done', tasks: [{ kind: 'plan-step', input: { idx: 0, generation: 0 } }] }),
        done: async (ctx) => ({ type: 'complete', result: (await ctx.children())[0]!.error }),
      },
    }));
    await k.kernel.start();
    const { run } = await submit(k, { requestId: 'drift-input', runKind: 'plan', root: { kind: 'drift-root', input: planInput() } });
    await k.kernel.waitForRun(run.id);
    const [step] = await k.store.listTasks({ parentId: run.rootTaskId! });
    expect(step!.error).toMatchObject({ code: 'input_invalid', details: { kind: 'plan-step', phase: 'run', fields: ['index'] } });
  });

  it('fails an agent approval timer whose stored input drifted with input_invalid naming the field, instead of completing as not expired', async () => {
    k = tempKernel();
    k.registry.register(approvalTimerHandler(new Proxy({}, { get: (_t, name) => { throw new Error(`the agent deps were used (${String(name)})`); } }) as AgentDeps));
    k.registry.register(defineTask({
      kind: 'timer-root',
      input: z.unknown(),
      initialPhase: 'spawn',
      phases: {
        // `expiresAt` stored as `expires`, as another version might have written it.
        spawn: async () => ({ type: 'spawn', join: 'allSettled', phase: 'done', tasks: [{ kind: 'agent-approval-timer', input: { toolCallId: 'call_1', expires: 1 } }] }),
        done: async () => ({ type: 'complete' }),
      },
    }));
    await k.kernel.start();
    const { run } = await submit(k, { requestId: 'drift-timer', runKind: 'agent', root: { kind: 'timer-root', input: {} } });
    await k.kernel.waitForRun(run.id);
    const [timer] = await k.store.listTasks({ parentId: run.rootTaskId! });
    expect(timer!.outcome).toBe('error');
    expect(timer!.error).toMatchObject({ code: 'input_invalid', details: { kind: 'agent-approval-timer', phase: 'wait', fields: ['expiresAt'] } });
  });

  it('refuses a decision whose checkpoint or result does not match the kind\'s schemas, committing neither', async () => {
    k = tempKernel();
    const shape = (bad: 'checkpoint' | 'result') =>
      defineTask({
        kind: `bad-${bad}`,
        input: z.object({}),
        checkpoint: z.object({ count: z.number() }),
        result: z.object({ total: z.number() }),
        initialPhase: 'a',
        phases: {
          a: async () => ({ type: 'next', phase: 'b', checkpoint: (bad === 'checkpoint' ? { count: 'one' } : { count: 1 }) as never }),
          b: async (ctx) => ({ type: 'complete', result: (bad === 'result' ? { sum: ctx.state.count } : { total: ctx.state.count }) as never }),
        },
      });
    k.registry.register(shape('checkpoint'));
    k.registry.register(shape('result'));
    await k.kernel.start();
    for (const bad of ['checkpoint', 'result'] as const) {
      const { run } = await submit(k, { requestId: `bad-${bad}`, runKind: 'test', root: { kind: `bad-${bad}`, input: {} } });
      expect((await k.kernel.waitForRun(run.id)).state).toBe('failed');
      const task = (await k.store.getTask(run.rootTaskId!))!;
      expect(task.error).toMatchObject({ code: `${bad}_invalid`, details: { kind: `bad-${bad}`, phase: bad === 'checkpoint' ? 'a' : 'b', fields: [bad === 'checkpoint' ? 'count' : 'total'] } });
      expect(task.result).toBeNull();
      if (bad === 'checkpoint') expect(task.checkpoint).toBeNull();
    }
  });
});
