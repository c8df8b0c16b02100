import { afterEach, describe, expect, it } from 'vitest';
import { ENTRY, type ModelEntry, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

const bodies = async <T>(w: AgentWorld, sessionId: string, kind: string) => (await w.rt.store.listEntries(sessionId)).filter((e) => e.kind === kind).map((e) => e.body as unknown as T);

describe('agent run', { timeout: 180_000 }, () => {
  it('runs the model and tool loop in the sandbox until the model answers, recording usage per request', async () => {
    w = await agentWorld([
      { content: 'Writing the script.', toolCalls: [{ name: 'write_file', arguments: { path: 'src/hello.sh', content: 'echo hello from $1\n' } }] },
      { toolCalls: [{ name: 'exec', arguments: { command: 'sh src/hello.sh berth' } }, { name: 'list_files', arguments: { path: '.', recursive: true } }] },
      { content: 'The script prints: hello from berth.' },
    ]);
    const { run } = await w.start('write a hello script and run it');
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('completed');
    const results = await bodies<ToolResultEntry>(w, run.sessionId, ENTRY.toolResult);
    expect(results.map((r) => [r.name, r.status])).toEqual([['write_file', 'ok'], ['exec', 'ok'], ['list_files', 'ok']]);
    expect(results.find((r) => r.name === 'exec')!.content).toContain('hello from berth');
    expect(results.find((r) => r.name === 'list_files')!.content).toContain('src/hello.sh');
    const models = await bodies<ModelEntry>(w, run.sessionId, ENTRY.model);
    expect(models).toHaveLength(3);
    expect(models.every((m) => m.usage && m.usage.totalTokens > 0)).toBe(true);
    expect(models.at(-1)!.content).toBe('The script prints: hello from berth.');
    // The third request carried every tool result back to the model, in call order.
    const third = w.model.requests.at(-1)!.body.messages;
    expect(third.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(['call_0_0', 'call_1_0', 'call_1_1']);
    expect(w.live.some((e) => e.type === 'model-delta')).toBe(true);
    const root = await w.rt.store.getTask(run.rootTaskId!);
    expect(root?.result).toEqual({ answer: 'The script prints: hello from berth.', turns: 3 });
  });

  it('retries a 429 and a dropped stream with backoff in task state and the run in retry_wait, keeping the partial text as an interruption that never drives tools', async () => {
    w = await agentWorld([
      { content: 'Running the listing now, please wait for it.', toolCalls: [{ name: 'exec', arguments: { command: 'echo side-effect >> /tmp/ran; cat /tmp/ran' } }], faults: ['429', 'drop'] },
      { content: 'done' },
    ]);
    const { run } = await w.start('list');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    expect(w.model.requests.map((r) => r.servedFault)).toEqual(['429', 'drop', null, null]);
    const interruptions = await bodies<{ attempt: number; code: string; partialText: string }>(w, run.sessionId, ENTRY.interruption);
    expect(interruptions.map((i) => [i.attempt, i.code])).toEqual([[1, 'model_rate_limited'], [2, expect.stringMatching(/model_connection|model_stream_incomplete/)]]);
    expect(interruptions[1]!.partialText.length).toBeGreaterThan(0);
    // Each backoff is visible on the run: it waits in retry_wait and runs again for the next attempt.
    const moves = (await w.rt.store.listRunTransitions(run.id)).map((t) => `${t.from}->${t.to}`);
    expect(moves).toEqual(['null->admitted', 'admitted->running', 'running->retry_wait', 'retry_wait->running', 'running->retry_wait', 'retry_wait->running', 'running->completed']);
    const waits = (await w.rt.store.listRunTransitions(run.id)).filter((t) => t.to === 'retry_wait').map((t) => t.reason);
    expect(waits[0]).toMatch(/^model request failed \(model_rate_limited\); retry 2 of \d+ in [\d.]+s$/);
    expect('Running the listing now, please wait for it.'.startsWith(interruptions[1]!.partialText)).toBe(true);
    // The exec ran once: from the complete answer, not from the broken one.
    const results = await bodies<ToolResultEntry>(w, run.sessionId, ENTRY.toolResult);
    expect(results).toHaveLength(1);
    expect(results[0]!.content).toContain('side-effect');
    expect(results[0]!.content.match(/side-effect/g)).toHaveLength(1);
    // Interruptions are records for operators, not part of what the model reads.
    const last = w.model.requests.at(-1)!.body.messages;
    expect(JSON.stringify(last)).not.toContain('model_rate_limited');
  });

  it('answers an unknown tool, arguments that are not JSON and arguments the schema refuses with errors the model reads', async () => {
    w = await agentWorld([
      {
        toolCalls: [
          { name: 'deploy', arguments: { where: 'prod' } },
          { name: 'exec', arguments: '{"command": "ls' },
          { name: 'read_file', arguments: { path: 42 } },
          { name: 'read_file', arguments: { path: 'nope.txt' } },
        ],
      },
      { content: 'I see the errors.' },
    ]);
    const { run } = await w.start('try things');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const results = await bodies<ToolResultEntry>(w, run.sessionId, ENTRY.toolResult);
    const byId = new Map(results.map((r) => [r.toolCallId, r]));
    expect(byId.get('call_0_0')).toMatchObject({ status: 'invalid', content: expect.stringContaining('no tool named "deploy"') });
    expect(byId.get('call_0_1')).toMatchObject({ status: 'invalid', content: expect.stringContaining('not valid JSON') });
    expect(byId.get('call_0_2')).toMatchObject({ status: 'invalid', content: expect.stringMatching(/invalid arguments for read_file: path/) });
    // Refused (no such file): it did nothing, so it is not `ok`.
    expect(byId.get('call_0_3')).toMatchObject({ status: 'error', isError: true, content: expect.stringContaining('does not exist') });
    const tools = w.model.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool');
    expect(tools).toHaveLength(4);
    expect(tools[1]!.content).toContain('[invalid]');
    // No effect was recorded for a call that never ran.
    const effects = await w.rt.store.listEffects({ runId: run.id });
    expect(effects.map((e) => e.kind)).toEqual(['tool.read_file']);
  });

  it('fails the run with turn_limit when the model keeps calling tools past the cap', async () => {
    w = await agentWorld((turn) => ({ toolCalls: [{ name: 'exec', arguments: { command: `echo ${turn}`, safe: true } }] }));
    const { run } = await w.start('loop forever', { settings: { maxTurns: 3 } });
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('failed');
    expect((await w.rt.store.getTask(run.rootTaskId!))?.error?.code).toBe('turn_limit');
    expect(w.model.requests).toHaveLength(3);
  });
});

