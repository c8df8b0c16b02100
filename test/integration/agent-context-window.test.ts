import { afterEach, describe, expect, it } from 'vitest';
import { continueSession, ENTRY, type CompactionEntry, type InterruptionEntry, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';
import { lastJson } from '../support/plan-fixture';
import { invariantGuard } from '../support/invariant-check';
import { turnFromCallIds } from '../support/model-server';
import { longScript, TURNS, WINDOW } from '../support/agent-long-script';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

const tools = ['write_file', 'read_file'];

describe('an agent session longer than the model window', { timeout: 600_000 }, () => {
  it('completes 120 turns of 1.5 KB tool results against a 4,096-token server: every request fits, compactions are entries, the store keeps every result whole', async () => {
    w = await agentWorld(longScript, { server: { contextTokens: WINDOW, turnOf: turnFromCallIds } });
    const { run } = await w.start('Read big.txt many times.', { settings: { tools, maxTurns: TURNS + 5, model: { ...w.settings().model, contextTokens: WINDOW } } });
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    const served = w.model.requests;
    expect(served.filter((r) => r.overflow)).toEqual([]);
    expect(Math.max(...served.map((r) => r.promptTokens))).toBeLessThanOrEqual(WINDOW);
    expect(served.length).toBe(TURNS + 2);
    const entries = await w.rt.store.listEntries(run.sessionId);
    const compactions = entries.filter((e) => e.kind === ENTRY.compaction).map((e) => e.body as unknown as CompactionEntry);
    expect(compactions.length).toBeGreaterThan(5);
    for (const c of compactions) expect(c.estimatedAfter).toBeLessThanOrEqual(c.budgetTokens);
    // Cuts only grow: the prompt's prefix changes at a compaction and nowhere else.
    for (let i = 1; i < compactions.length; i++) expect(compactions[i]!.droppedTurns).toBeGreaterThanOrEqual(compactions[i - 1]!.droppedTurns);
    const results = entries.filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
    expect(results).toHaveLength(TURNS + 1);
    for (const r of results.slice(1)) expect(r.content).toContain('line 059: the quick brown fox jumps');
    // The newest turn's result is always shown whole: the model reads what it just asked for.
    for (const r of served.slice(2)) expect(r.body.messages.at(-1)!.content).toContain('line 059');
    // The task and the note saying what is left out are always there.
    const lastReq = served.at(-1)!.body.messages;
    expect(lastReq.find((m) => m.role === 'user')!.content).toBe('Read big.txt many times.');
    expect(lastReq[0]!.content).toContain('[Context note: to fit the model\'s context window');
  });

  it('with no window set, learns it from the server\'s 400 context-size refusal, compacts to it and completes; the refusal is an interruption entry naming the sizes', async () => {
    const reads = 40;
    w = await agentWorld((turn, body) => longScript(turn, body, reads), { server: { contextTokens: WINDOW, turnOf: turnFromCallIds } });
    const { run } = await w.start('Read big.txt many times.', { settings: { tools, maxTurns: reads + 5 } });
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('completed');
    const refused = w.model.requests.filter((r) => r.overflow);
    // Once told, never again: the estimate is corrected by the server's own count.
    expect(refused).toHaveLength(1);
    const entries = await w.rt.store.listEntries(run.sessionId);
    const overflow = entries.filter((e) => e.kind === ENTRY.interruption).map((e) => e.body as unknown as InterruptionEntry);
    expect(overflow).toHaveLength(1);
    expect(overflow[0]).toMatchObject({ code: 'model_context_overflow', overflow: { contextTokens: WINDOW, promptTokens: refused[0]!.promptTokens } });
    expect(overflow[0]!.message).toContain(`(${refused[0]!.promptTokens} prompt tokens, window ${WINDOW})`);
    expect(entries.filter((e) => e.kind === ENTRY.compaction).length).toBeGreaterThan(2);
    expect(w.model.requests.filter((r) => !r.overflow)).toHaveLength(reads + 2);
  });

  it('fails a turn that cannot fit even after compaction with context_too_large naming the sizes, and a berth chat with a larger window continues the session', async () => {
    w = await agentWorld(longScript, { server: { contextTokens: WINDOW, turnOf: turnFromCallIds } });
    const { run } = await w.start('Read big.txt many times.', { settings: { tools, maxTurns: 4, model: { ...w.settings().model, contextTokens: 700 } } });
    const failed = await w.rt.kernel.waitForRun(run.id);
    expect(failed.state).toBe('failed');
    const root = await w.rt.store.getTask(failed.rootTaskId!);
    expect(root?.error?.code).toBe('context_too_large');
    expect(root?.error?.message).toMatch(/about \d+ tokens even with every older turn left out, over the budget of 188 \(a window of 700 tokens less 512 for the answer\)/);
    expect(w.model.requests.filter((r) => r.overflow)).toEqual([]);
    const deps = { ...w.rt, toolNames: [...w.rt.agent.tools.keys()] };
    const next = await continueSession(deps, { sessionId: run.sessionId, message: 'Read it once more.', settings: { model: { contextTokens: WINDOW } as never } });
    const done = await w.rt.kernel.waitForRun(next.run.id);
    expect(done.state).toBe('completed');
    expect(w.model.requests.filter((r) => r.overflow)).toEqual([]);
  });
});

describe('a compacted session forked and continued with berth chat', { timeout: 600_000 }, () => {
  let c: CliWorld | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  it('sends from the fork the very requests the original session sent for the same message, compaction included', async () => {
    const reads = 30;
    const window = 6_000;
    c = await cliWorld((turn, body) => longScript(turn, body, reads), { snapshotPolicy: 'after-each-step', server: { contextTokens: window, turnOf: turnFromCallIds } });
    const first = await c.cli([...c.agentArgs('Read big.txt many times.', ['--context-tokens', String(window), '--max-turns', String(reads + 5)]), '--json']);
    expect(first.code, first.stderr).toBe(0);
    const session = lastJson<{ run: { sessionId: string; state: string } }>(first).run.sessionId;
    const compactions = await c.read(async (s) => (await s.listEntries(session)).filter((e) => e.kind === ENTRY.compaction).length);
    expect(compactions).toBeGreaterThan(2);

    const before = c.model.requests.length;
    const again = await c.cli(['chat', session, 'Read it once more.', '--json']);
    expect(again.code, again.stderr).toBe(0);
    const original = c.model.requests.slice(before).map((r) => r.body);
    expect(original).toHaveLength(2);

    const forked = await c.cli(['fork', session, '--at', '1', '--json']);
    expect(forked.code, forked.stderr).toBe(0);
    const fork = lastJson<{ sessionId: string }>(forked).sessionId;
    const mark = c.model.requests.length;
    const chat = await c.cli(['chat', fork, 'Read it once more.', '--json']);
    expect(chat.code, chat.stderr).toBe(0);
    expect(c.model.requests.slice(mark).map((r) => r.body)).toEqual(original);
    expect(c.model.requests.filter((r) => r.overflow)).toEqual([]);
    expect(Math.max(...c.model.requests.map((r) => r.promptTokens))).toBeLessThanOrEqual(window);
    // Both sessions keep the run invariants (berth check).
    expect((await invariantGuard().check(c.store))?.message).toBeUndefined();
  });
});
