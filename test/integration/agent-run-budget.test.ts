import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ENTRY, type ToolResultEntry } from '../../host/agent';
import type { Store } from '../../host/store';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { cliWorld, startInBackground, type CliWorld } from '../support/agent-cli-world';

let w: AgentWorld | undefined;
let c: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  await c?.cleanup();
  w = undefined;
  c = undefined;
});

const results = async (store: Store, sessionId: string) => (await store.listEntries(sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
const exec = (command: string) => ({ name: 'exec', arguments: { command } });
const STOPPED = /was stopped after [\d.]+ s: the run's commands used up its budget of (\d+) s \(resources\.runBudgetS/;
const REFUSED = /did not run: the run's commands used up its budget of (\d+) s \(resources\.runBudgetS/;

/** Each tool call of the run, in call order: the command milliseconds its committed result counted, and the budget its turn began with. */
async function calls(store: Store, runId: string): Promise<Array<{ ms: number; budgetMs?: number }>> {
  const tools = (await store.listTasks({ runId })).filter((t) => t.kind === 'agent-tool');
  return tools.map((t) => ({ ms: (t.result as { commandMs?: number } | null)?.commandMs ?? 0, budgetMs: (t.input as { budgetMs?: number }).budgetMs }));
}

describe("an agent run's command budget (resources.runBudgetS)", { timeout: 300_000 }, () => {
  it('stops the command that reaches it, starts no command after it, and fails the run run_budget_exceeded naming the bound', async () => {
    // Before: all five commands ran (the sleep 30 to its end) and the run completed.
    w = await agentWorld([{ toolCalls: [exec('sleep 1'), exec('sleep 30'), exec('sleep 1'), exec('sleep 1'), exec('sleep 1')] }, { content: 'done' }]);
    const { run } = await w.start('sleep a lot', { runBudgetS: 2 });
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('failed');
    const root = await w.rt.store.getTask(run.rootTaskId!);
    expect(root?.error?.code).toBe('run_budget_exceeded');
    expect(root?.error?.message).toMatch(/budget of 2 s \(resources\.runBudgetS/);
    // The run ended with the turn: the model was not asked again.
    expect(w.model.requests).toHaveLength(1);

    const r = await results(w.rt.store, run.sessionId);
    expect(r).toHaveLength(5);
    // `sleep 30` cannot end within the budget: it (or, on a very slow engine, the `sleep 1` before it) is stopped.
    const stopped = r.findIndex((x) => STOPPED.test(x.content));
    expect([0, 1]).toContain(stopped);
    expect(r[stopped]!.content.match(STOPPED)![1]).toBe('2');
    for (const x of r.slice(0, stopped)) expect(x).toMatchObject({ status: 'ok', content: 'exit code 0' });
    for (const x of r.slice(stopped + 1)) {
      expect(x.status).toBe('error');
      expect(x.content.match(REFUSED)?.[1]).toBe('2');
    }
    for (const x of r) expect(x.content).not.toContain(w.dir);
    // The commands counted took the budget, and the refused calls nothing.
    const ms = (await calls(w.rt.store, run.id)).map((x) => x.ms);
    expect(ms.slice(stopped + 1)).toEqual(r.slice(stopped + 1).map(() => 0));
    expect(ms.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2000);
  });

  it('counts the command time of the turns before a host was killed: the resumed run gets only what was left', async () => {
    // Turn 1 uses about 2 s of a 4 s budget; the host is killed while turn 2's request hangs.
    c = await cliWorld([{ toolCalls: [exec('sleep 2')] }, { faults: ['hang'], toolCalls: [exec('sleep 30')] }, { content: 'done' }]);
    const env = join(c.dir, 'env.yaml');
    writeFileSync(env, readFileSync(env, 'utf8').replace('commandTimeoutS: 60 }', 'commandTimeoutS: 60, runBudgetS: 4 }'));
    const host = await startInBackground(c, c.agentArgs('sleep twice'));
    while (!c.model.requests.some((q) => q.servedFault === 'hang')) await sleep(100);
    host.child.kill('SIGKILL');
    await host.exited;
    const runId = await c.read(async (s) => (await s.listRuns())[0]!.id);

    const resumed = await c.cli(['resume', runId]);
    const { state, error, r, made } = await c.read(async (s) => {
      const run = (await s.getRun(runId))!;
      return { state: run.state, error: (await s.getTask(run.rootTaskId!))?.error, r: await results(s, run.sessionId), made: await calls(s, runId) };
    });
    expect(state, resumed.stderr.slice(-800)).toBe('failed');
    expect(error?.code).toBe('run_budget_exceeded');
    expect(r.map((x) => x.status)).toEqual(['ok', 'ok']);
    expect(r[0]!.content).toBe('exit code 0');
    expect(r[1]!.content.match(STOPPED)?.[1]).toBe('4');
    // The resumed host's turn began with what the first call left (committed before the kill), and
    // its command was stopped within that: given the whole 4 s again, it would have run 4 s or more.
    expect(made[0]!.ms).toBeGreaterThanOrEqual(2000);
    expect(made[1]!.budgetMs).toBeCloseTo(4000 - made[0]!.ms, 6);
    expect(made[1]!.ms).toBeLessThan(4000);
    const check = await c.cli(['check', runId]);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });
});
