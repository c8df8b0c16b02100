import { describe, expect, it } from 'vitest';
import { buildContext, ENTRY, planContext, type CompactionEntry, type Cut, type ModelEntry, type ToolResultEntry } from '../../host/agent';
import type { Entry, Json } from '../../host/model';
import { builtinTools } from '../../tools';

let seq = 0;
const entry = (kind: string, body: unknown): Entry => ({ id: `ent_${++seq}`, sessionId: 's', seq, conversationId: null, runId: 'r', taskId: 't', kind, body: body as Json, commitSeq: seq, at: 0 });
const model = (turn: number, calls: Array<[string, string, string]>, content: string | null = null) =>
  entry(ENTRY.model, { turn, content, toolCalls: calls.map(([id, name, args]) => ({ id, name, arguments: args })), finishReason: calls.length ? 'tool_calls' : 'stop', model: 'm', usage: null } satisfies ModelEntry);
const result = (id: string, name: string, content: string, status: ToolResultEntry['status'] = 'ok') => entry(ENTRY.toolResult, { toolCallId: id, name, status, isError: status !== 'ok', content } satisfies ToolResultEntry);
const tools = new Map(builtinTools.map((t) => [t.name, t]));
const opts = (keepRecentTurns = 1, oldOutputChars = 100) => ({ systemPrompt: 'sys', tools, compaction: { keepRecentTurns, oldOutputChars } });

describe('context rebuilt from entries', () => {
  it('puts each tool result right after its call, in call order, whatever order they were committed in', () => {
    const entries = [entry(ENTRY.user, { text: 'go' }), model(1, [['a', 'exec', '{"command":"x"}'], ['b', 'read_file', '{"path":"f"}']]), result('b', 'read_file', 'B'), result('a', 'exec', 'A'), model(2, [], 'done')];
    const m = buildContext(entries, opts(5));
    expect(m.map((x) => x.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool', 'assistant']);
    expect(m.slice(3, 5)).toEqual([
      { role: 'tool', tool_call_id: 'a', content: 'A' },
      { role: 'tool', tool_call_id: 'b', content: 'B' },
    ]);
  });

  it('leaves interruption and approval records out of the conversation', () => {
    const entries = [entry(ENTRY.user, { text: 'go' }), entry(ENTRY.interruption, { turn: 1, attempt: 1, code: 'model_connection', message: 'x', partialText: 'half an answer' }), entry(ENTRY.approvalRequested, { approvalId: 'apr' }), model(1, [], 'ok')];
    expect(JSON.stringify(buildContext(entries, opts()))).not.toContain('half an answer');
    expect(buildContext(entries, opts()).map((x) => x.role)).toEqual(['system', 'user', 'assistant']);
  });

  it('shortens tool outputs of older turns, never the newest ones, and says where the whole output is', () => {
    const long = 'x'.repeat(5_000);
    const entries = [entry(ENTRY.user, { text: 'go' }), model(1, [['old', 'exec', '{}']]), result('old', 'exec', long), model(2, [['new', 'exec', '{}']]), result('new', 'exec', long)];
    const m = buildContext(entries, opts(1, 200));
    const old = m.find((x) => x.role === 'tool' && x.tool_call_id === 'old') as { content: string };
    const recent = m.find((x) => x.role === 'tool' && x.tool_call_id === 'new') as { content: string };
    expect(old.content.length).toBeLessThan(400);
    expect(old.content).toContain("the session's record keeps the whole output: call old");
    expect(recent.content).toBe(long);
    // The store is untouched: compaction is a view.
    expect((entries[2]!.body as { content: string }).content).toBe(long);
  });

  it('caps even a recent output at its tool context cap, keeping head and tail', () => {
    const huge = `HEAD${'y'.repeat(50_000)}TAIL`;
    const m = buildContext([model(1, [['c', 'exec', '{}']]), result('c', 'exec', huge)], opts(3));
    const c = (m.at(-1) as { content: string }).content;
    expect(c.length).toBeLessThan(13_000);
    expect(c.startsWith('HEAD')).toBe(true);
    expect(c).toContain('TAIL');
  });

  it('answers a call without a committed result, sends {} for unparseable arguments, and marks non-ok results', () => {
    const m = buildContext([model(1, [['p', 'exec', '{"command": "ls'], ['q', 'exec', '{}']]), result('p', 'exec', 'error: bad json', 'invalid')], opts());
    const a = m[1] as { tool_calls: Array<{ function: { arguments: string } }> };
    expect(a.tool_calls[0]!.function.arguments).toBe('{}');
    expect(m[2]).toMatchObject({ tool_call_id: 'p', content: '[invalid] error: bad json' });
    expect(m[3]).toMatchObject({ tool_call_id: 'q', content: expect.stringContaining('no result was recorded') });
  });
});

describe('context compaction', () => {
  const session = () => {
    const out: Entry[] = [entry(ENTRY.user, { text: 'the task' })];
    for (let t = 1; t <= 10; t++) out.push(model(t, [[`c${t}`, 'read_file', '{"path":"f"}']]), result(`c${t}`, 'read_file', `${t}:${'r'.repeat(900)}`));
    return out;
  };
  const request = (entries: Entry[]) => (cut?: Cut) => ({ messages: buildContext(entries, { ...opts(3, 600), cut }), tools: [] });
  const budget = { replyTokens: 100, bytesPerToken: 3, targetShare: 0.6, turn: 11 };

  it('applies the newest compaction entry: older turns left out, the next ones stubbed naming the call, the first user message and a note kept', () => {
    const entries = [...session(), entry(ENTRY.compaction, { rule: 'stub-then-drop/1', turn: 1, stubbedTurns: 6, droppedTurns: 4, contextTokens: 1, budgetTokens: 1, estimatedBefore: 1, estimatedAfter: 1, bytesPerToken: 3 } satisfies CompactionEntry)];
    const m = buildContext(entries, opts(3, 600));
    expect(m[0]!.content).toContain('the oldest 4 assistant turns');
    expect(m[1]).toEqual({ role: 'user', content: 'the task' });
    const calls = m.flatMap((x) => (x.role === 'tool' ? [x.tool_call_id] : []));
    expect(calls).toEqual(['c5', 'c6', 'c7', 'c8', 'c9', 'c10']);
    expect((m.find((x) => x.role === 'tool' && x.tool_call_id === 'c5') as { content: string }).content).toMatch(/^\[read_file result \(ok, 902 bytes\) left out to fit the context; the session's record keeps it: call c5\]$/);
    expect((m.at(-1) as { content: string }).content).toContain('10:rrr');
  });

  it('plans nothing while the request fits, and a cut within the target share once it does not, never touching the newest turn', () => {
    const entries = session();
    expect(planContext(entries, { ...budget, contextTokens: 100_000, request: request(entries) }).kind).toBe('fits');
    const plan = planContext(entries, { ...budget, contextTokens: 1_500, request: request(entries) });
    expect(plan.kind).toBe('compact');
    const c = (plan as { entry: CompactionEntry }).entry;
    expect(c.estimatedAfter).toBeLessThanOrEqual(Math.floor(1_400 * 0.6));
    expect(c.droppedTurns).toBeLessThanOrEqual(9);
    expect(c.stubbedTurns).toBe(9);
    // The same entries give the same cut: a resumed host or a fork decides alike.
    expect(planContext(entries, { ...budget, contextTokens: 1_500, request: request(entries) })).toEqual(plan);
    // Recorded, it is what the context shows, and it fits.
    const after = [...entries, entry(ENTRY.compaction, c)];
    expect(planContext(after, { ...budget, contextTokens: 1_500, request: request(after) }).kind).toBe('fits');
  });

  it('says too_large with the sizes when even the harshest cut is over the budget', () => {
    const entries = session();
    const plan = planContext(entries, { ...budget, contextTokens: 300, request: request(entries) });
    expect(plan).toMatchObject({ kind: 'too_large', budget: 200, contextTokens: 300 });
  });
});
