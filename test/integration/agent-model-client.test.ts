import { afterEach, describe, expect, it } from 'vitest';
import { ModelCallError, openAiChatClient, readApiKey, type ChatRequest } from '../../host/agent/model';
import { startModelServer, type ModelServer, type ScriptedTurn } from '../support/model-server';

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const req = (stream: boolean): ChatRequest => ({
  model: 'scripted-1',
  messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'hi' }],
  tools: [{ type: 'function', function: { name: 'exec', description: 'run', parameters: { type: 'object' } } }],
  stream,
});

async function client(turns: ScriptedTurn[]) {
  server = await startModelServer(turns);
  return openAiChatClient({ baseUrl: server.url, apiKey: () => 'sk-test-secret' });
}

const call = (c: Awaited<ReturnType<typeof client>>, stream: boolean, timeoutMs = 5_000) => c.complete(req(stream), { signal: new AbortController().signal, timeoutMs });

async function failure(p: Promise<unknown>): Promise<ModelCallError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ModelCallError);
    return err as ModelCallError;
  }
  throw new Error('expected the request to fail');
}

describe('model client over the openai package', () => {
  it('takes the whole JSON completion of a server that ignores stream: true (was model_stream_incomplete, retried to the end of the turn)', async () => {
    server = await startModelServer([{ content: 'Whole answer.', toolCalls: [{ name: 'exec', arguments: { command: 'make test' } }] }], { ignoreStream: true });
    const c = openAiChatClient({ baseUrl: server.url, apiKey: () => 'sk-test-secret' });
    const deltas: string[] = [];
    const r = await c.complete(req(true), { signal: new AbortController().signal, timeoutMs: 5_000, onDelta: (t) => deltas.push(t) });
    expect(server.requests[0]!.body.stream).toBe(true);
    expect(r).toMatchObject({ content: 'Whole answer.', finishReason: 'tool_calls', toolCalls: [{ name: 'exec', arguments: JSON.stringify({ command: 'make test' }) }] });
    expect(r.usage?.totalTokens).toBeGreaterThan(0);
    expect(deltas).toEqual(['Whole answer.']);
  });

  it('assembles a streamed answer with text, tool calls and token usage', async () => {
    const c = await client([{ content: 'Let me look.', toolCalls: [{ name: 'exec', arguments: { command: 'ls -la' } }, { name: 'read_file', arguments: { path: 'a.txt' } }] }]);
    const deltas: string[] = [];
    const r = await c.complete(req(true), { signal: new AbortController().signal, timeoutMs: 5_000, onDelta: (t) => deltas.push(t) });
    expect(r.content).toBe('Let me look.');
    expect(deltas.join('')).toBe('Let me look.');
    expect(deltas.length).toBeGreaterThan(1);
    expect(r.toolCalls).toEqual([
      { id: 'call_0_0', name: 'exec', arguments: '{"command":"ls -la"}' },
      { id: 'call_0_1', name: 'read_file', arguments: '{"path":"a.txt"}' },
    ]);
    expect(r.finishReason).toBe('tool_calls');
    expect(r.usage).toMatchObject({ promptTokens: expect.any(Number), completionTokens: expect.any(Number) });
    expect(server!.requests[0]!.body.stream).toBe(true);
  });

  it('answers without streaming when the request says so', async () => {
    const c = await client([{ content: 'done' }]);
    const r = await call(c, false);
    expect(r).toMatchObject({ content: 'done', toolCalls: [], finishReason: 'stop', responseId: 'chatcmpl-0' });
    expect(r.usage?.totalTokens).toBeGreaterThan(0);
  });

  it('reports a 429 as a retryable rate limit carrying the server retry-after', async () => {
    const c = await client([{ content: 'ok', faults: ['429'] }]);
    const e = await failure(call(c, true));
    expect(e).toMatchObject({ failure: 'model_rate_limited', retryable: true, status: 429, retryAfterMs: 50 });
    expect((await call(c, true)).content).toBe('ok');
  });

  it('reports a 5xx as a retryable server error', async () => {
    const c = await client([{ content: 'ok', faults: ['500'] }]);
    expect(await failure(call(c, false))).toMatchObject({ failure: 'model_server_error', retryable: true, status: 500 });
  });

  it('keeps the text that streamed before a dropped connection and calls the failure retryable', async () => {
    const c = await client([{ content: 'This answer will be cut off in the middle of the stream.', faults: ['drop'] }]);
    const e = await failure(call(c, true));
    expect(e.retryable).toBe(true);
    expect(['model_connection', 'model_stream_incomplete']).toContain(e.failure);
    expect(e.partialText.length).toBeGreaterThan(0);
    expect('This answer will be cut off in the middle of the stream.'.startsWith(e.partialText)).toBe(true);
  });

  it('gives up on an answer that does not come within the timeout, retryably', async () => {
    const c = await client([{ content: 'late', faults: ['hang'] }]);
    const t0 = Date.now();
    expect(await failure(call(c, true, 300))).toMatchObject({ failure: 'model_timeout', retryable: true });
    // The server never answers: returning at all is the timeout at work (bound loose for a loaded machine).
    expect(Date.now() - t0).toBeLessThan(30_000);
  });

  it('passes a malformed tool-call argument text through unchanged for the tool task to judge', async () => {
    const c = await client([{ toolCalls: [{ name: 'exec', arguments: '{"command": "ls' }] }]);
    const r = await call(c, true);
    expect(r.toolCalls[0]).toMatchObject({ name: 'exec', arguments: '{"command": "ls' });
  });

  it('sends the key read from the named variable as a bearer token and names only the variable when it is missing', async () => {
    const c = await client([{ content: 'ok' }]);
    await call(c, false);
    expect(server!.requests[0]!.authorization).toBe('Bearer sk-test-secret');
    expect(readApiKey({ apiKeyEnv: 'X_KEY' }, { X_KEY: 'abc' })).toBe('abc');
    expect(() => readApiKey({ apiKeyEnv: 'X_KEY' }, {})).toThrow(/\$X_KEY, which is not set/);
  });
});
