import { describe, expect, it } from 'vitest';
import { callerDrivenChatClient, dictatedMessage, parseDictated, type ChatMessage, type ChatRequest } from '../../host/agent/model';

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
});
