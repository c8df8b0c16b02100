import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ENTRY, type ToolResultEntry } from '../../host/agent';
import type { ToolDefinition } from '../../tools';
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
const writeFile = (path: string, content: string) => ({ name: 'write_file', arguments: { path, content } });
const readFile = (path: string) => ({ name: 'read_file', arguments: { path } });
/** Whether a path exists in the session's sandbox, asked of the engine directly (the run is over). */
const existsInSandbox = (containerId: string, path: string) => {
  try {
    execFileSync('docker', ['exec', containerId, 'test', '-e', path]);
    return true;
  } catch {
    return false;
  }
};
/** The one sandbox container of a host id, found synchronously (the engine's CLI). */
function hostContainer(hostId: string): string {
  const ids = execFileSync('docker', ['ps', '-q', '--no-trunc', '--filter', `label=berth.host=${hostId}`], { encoding: 'utf8' }).trim().split('\n');
  expect(ids).toHaveLength(1);
  return ids[0]!;
}

/**
 * A tool as an application registers one, whose plan runs a command in the sandbox beside the
 * call's own (as a plan may: it reads the sandbox to fix what the call will do).
 */
const probe: ToolDefinition<Record<string, never>> = {
  name: 'probe',
  description: 'Looks, then acts.',
  input: z.strictObject({}),
  replay: 'safe',
  mutates: false,
  contextCap: 1_000,
  async plan(ctx) {
    const r = await ctx.sandbox.exec(['sleep', '1'], { timeoutMs: ctx.commandTimeoutMs });
    return { ok: true, plan: { looked: r.exitCode } };
  },
  async run(ctx) {
    const r = await ctx.sandbox.exec(['true'], { timeoutMs: ctx.commandTimeoutMs });
    return { content: `acted: exit ${r.exitCode}`, isError: false };
  },
};
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

  it('acts on no call after the budget is spent, with a command or without: a write_file and a read_file later in the turn are refused too', async () => {
    // Before: the write_file and the read_file after the stopped command ran (status ok), and late.txt was written.
    w = await agentWorld([{ toolCalls: [exec('sleep 30'), writeFile('late.txt', 'too late'), readFile('late.txt')] }, { content: 'done' }]);
    const { run } = await w.start('sleep, then write', { runBudgetS: 2 });
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('failed');
    expect((await w.rt.store.getTask(run.rootTaskId!))?.error?.code).toBe('run_budget_exceeded');
    expect(w.model.requests).toHaveLength(1);
    const r = await results(w.rt.store, run.sessionId);
    expect(r[0]!.content.match(STOPPED)?.[1]).toBe('2');
    for (const x of r.slice(1)) {
      expect(x.status).toBe('error');
      expect(x.content.match(REFUSED)?.[1]).toBe('2');
    }
    // The refused calls did nothing: no write, no command (not even the digest a write_file's result measures), no effect applied.
    const made = await calls(w.rt.store, run.id);
    expect(made.slice(1).map((x) => x.ms)).toEqual([0, 0]);
    const effects = await w.rt.store.listEffects({ runId: run.id });
    // (The write_file was refused at its plan, before its intent: it has no effect record at all.)
    for (const e of effects.filter((e) => e.kind !== 'tool.exec')) expect(e.status).toBe('failed');
    const lease = (await w.rt.store.listLeases({ sessionId: run.sessionId })).find((l) => l.releasedAt === null)!;
    expect(existsInSandbox(lease.containerId, '/workspace/late.txt')).toBe(false);
  });

  it("counts and cuts the commands a tool's plan runs beside its call's own, as the call's", async () => {
    // Before: each plan's `sleep 1` was neither counted nor cut: the three calls counted about the
    // time of their `true`, and the run went on and completed.
    w = await agentWorld([{ toolCalls: [{ name: 'probe', arguments: {} }, { name: 'probe', arguments: {} }, { name: 'probe', arguments: {} }] }, { content: 'done' }]);
    w.rt.agent.tools.set(probe.name, probe);
    const { run } = await w.start('probe thrice', { runBudgetS: 2 });
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('failed');
    expect((await w.rt.store.getTask(run.rootTaskId!))?.error?.code).toBe('run_budget_exceeded');
    const r = await results(w.rt.store, run.sessionId);
    const made = await calls(w.rt.store, run.id);
    // The first call's plan slept a second: counted with its call.
    expect(r[0]).toMatchObject({ status: 'ok', content: 'acted: exit 0' });
    expect(made[0]!.ms).toBeGreaterThanOrEqual(1000);
    // A later plan met the budget: stopped there (the call did not run), and the rest not started.
    const stopped = r.findIndex((x) => STOPPED.test(x.content));
    expect([1, 2]).toContain(stopped);
    expect(r[stopped]).toMatchObject({ status: 'error' });
    expect(r[stopped]!.content).toMatch(/It was this call's plan: the call did not run/);
    for (const x of r.slice(stopped + 1)) expect(x.content.match(REFUSED)?.[1]).toBe('2');
    expect(made.reduce((a, b) => a + b.ms, 0)).toBeGreaterThanOrEqual(2000);
  });

  it('cuts a command where the budget runs out on the clock it is counted with: the time its exec waited to start is not given to it again', async () => {
    // The sandbox is paused (as another process's snapshot commit pauses it) when the model's
    // command is asked for: its exec waits for the engine to take it, and that wait is counted.
    // Before: the command's cut was its timeout, started only when it started, so after the wait
    // it still got the whole 3 s again and touched `ran` (the run counted 3 s + the wait).
    let containerId = '';
    w = await agentWorld((turn) => {
      if (turn === 0) {
        // Synchronous, so the pause is in place before the answer that makes the call is sent.
        containerId = hostContainer(w!.hostId);
        execFileSync('docker', ['pause', containerId]);
        return { toolCalls: [exec('sleep 2; touch /workspace/ran; sleep 30')] };
      }
      return { content: 'done' };
    });
    const { run } = await w.start('wait, then sleep', { runBudgetS: 3 });
    try {
      // The call has begun (its effect is executing): its exec is waiting on the paused sandbox.
      while (!(await w.rt.store.listEffects({ runId: run.id })).some((e) => e.status === 'executing')) await sleep(50);
      // Past its deadline (3 s after it was asked for), however long the call took to ask.
      await sleep(4_000);
    } finally {
      if (containerId) execFileSync('docker', ['unpause', containerId]);
    }
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('failed');
    const r = await results(w.rt.store, run.sessionId);
    expect(r[0]!.content.match(STOPPED)?.[1]).toBe('3');
    expect(r[0]!.content).toMatch(/timed out/);
    // Killed as soon as it started: it never reached its `touch`, 2 s in.
    expect(existsInSandbox(containerId, '/workspace/ran')).toBe(false);
    // What was counted is the wait and the kill, from when the call asked for the command.
    expect((await calls(w.rt.store, run.id))[0]!.ms).toBeGreaterThanOrEqual(3000);
  });

  it('counts the command time of the turns before a host was killed: the resumed run gets only what was left', async () => {
    // Turn 1 uses about 2 s of a 4 s budget; the host is killed while turn 2's request hangs.
    c = await cliWorld([{ toolCalls: [exec('sleep 2')] }, { faults: ['hang'], toolCalls: [exec('sleep 30'), writeFile('late.txt', 'too late')] }, { content: 'done' }]);
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
    expect(r.map((x) => x.status)).toEqual(['ok', 'ok', 'error']);
    expect(r[0]!.content).toBe('exit code 0');
    expect(r[1]!.content.match(STOPPED)?.[1]).toBe('4');
    // The resumed host keeps the rule for calls without a command: spent is spent.
    expect(r[2]!.content.match(REFUSED)?.[1]).toBe('4');
    // The resumed host's turn began with what the first call left (committed before the kill), and
    // its command was stopped within that: given the whole 4 s again, it would have run 4 s or more.
    expect(made[0]!.ms).toBeGreaterThanOrEqual(2000);
    expect(made[1]!.budgetMs).toBeCloseTo(4000 - made[0]!.ms, 6);
    expect(made[1]!.ms).toBeLessThan(4000);
    const check = await c.cli(['check', runId]);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });
});
