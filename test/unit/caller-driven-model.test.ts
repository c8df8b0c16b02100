import { describe, expect, it } from 'vitest';
import { CALLER_DRIVEN_URL, callerDrivenChatClient, dictatedMessage, parseDictated, wrongSessionKind, type ChatMessage, type ChatRequest } from '../../host/agent/model';

const req = (messages: ChatMessage[]): ChatRequest => ({ model: 'caller', messages, tools: [], stream: false });
const opts = { signal: new AbortController().signal, timeoutMs: 1000 };
const call = { id: 'c1', tool: 'exec', arguments: { command: 'make test' } };

describe('the caller-driven model', () => {
  it('makes exactly the call the newest user message dictates', async () => {
    const r = await callerDrivenChatClient().complete(req([{ role: 'system', content: 's' }, { role: 'user', content: dictatedMessage(call) }]), opts);
    expect(r.toolCalls).toEqual([{ id: 'c1', name: 'exec', arguments: JSON.stringify({ command: 'make test' }) }]);
    expect(r.finishReason).toBe('tool_calls');
  });

  it('ends the turn without calls once the dictated call has its result', async () => {
    const r = await callerDrivenChatClient().complete(
      req([
        { role: 'user', content: dictatedMessage(call) },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'exec', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'exit code 0' },
      ]),
      opts,
    );
    expect(r.toolCalls).toEqual([]);
    expect(r.content).toBe('done');
  });

  it('answers a message that dictates no call with an error and no call', async () => {
    const r = await callerDrivenChatClient().complete(req([{ role: 'user', content: 'please run the tests' }]), opts);
    expect(r.toolCalls).toEqual([]);
    expect(r.content).toContain('dictated calls only');
    expect(parseDictated('{"berth.dictated-call": {"id": 1}}')).toBeNull();
  });

  it('refuses free text to a session an MCP client drives and a dictated call to one a model drives, saying what each session is and what to do', () => {
    const mcp = wrongSessionKind('ses_1', { baseUrl: CALLER_DRIVEN_URL }, 'please run the tests');
    expect(mcp?.code).toBe('session_caller_driven');
    expect(mcp?.message).toContain('session ses_1 was created by berth mcp');
    expect(mcp?.message).toContain('berth mcp --session ses_1');
    const model = wrongSessionKind('ses_2', { baseUrl: 'https://api.openai.com/v1' }, dictatedMessage(call));
    expect(model?.code).toBe('session_model_driven');
    expect(model?.message).toContain('berth chat ses_2 MESSAGE');
    expect(wrongSessionKind('ses_1', { baseUrl: CALLER_DRIVEN_URL }, dictatedMessage(call))).toBeNull();
    expect(wrongSessionKind('ses_2', { baseUrl: 'https://api.openai.com/v1' }, 'please run the tests')).toBeNull();
  });
});
