/**
 * The Responses API (`POST /v1/responses`) of the scripted model server, as coding-agent CLIs that
 * speak it (OpenAI's Codex CLI) call it: `input` items (messages, `function_call`,
 * `function_call_output`) in, a stream of `response.*` events (or one JSON response) out.
 *
 * The request is recorded as its Chat Completions equivalent (a model's consecutive output items
 * are one assistant message, a call's output is a `tool` message), so a script, the turn count and
 * the token count read both APIs alike. The usage is reported in the Responses spelling
 * (`input_tokens`, `output_tokens`) and kept in `reported` in the chat one.
 */
import type { ServerResponse } from 'node:http';
import type { RecordedRequest, ReportedUsage, ScriptedTurn } from './model-server';

type Item = { type?: string; role?: string; content?: unknown; name?: string; arguments?: string; call_id?: string; output?: unknown };
export type ResponsesBody = { model: string; stream?: boolean; input?: string | Item[]; tools?: unknown[] };

const text = (content: unknown): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? '').join('') : '';

/** The request as Chat Completions messages: what {@link RecordedRequest} holds. */
export function asChatBody(b: ResponsesBody): RecordedRequest['body'] {
  const messages: RecordedRequest['body']['messages'] = [];
  const items: Item[] = typeof b.input === 'string' ? [{ type: 'message', role: 'user', content: b.input }] : (b.input ?? []);
  for (const it of items) {
    const last = messages[messages.length - 1];
    if (it.type === 'function_call') {
      const call = { id: it.call_id, type: 'function', function: { name: it.name, arguments: it.arguments } };
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (it.type === 'function_call_output') {
      messages.push({ role: 'tool', tool_call_id: it.call_id, content: text(it.output) });
    } else if ((it.type === 'message' || it.type === undefined) && it.role) {
      // A model's text and the calls it made in the same answer are one assistant message.
      if (it.role === 'assistant' && last?.role === 'assistant' && !last.tool_calls) last.content = `${last.content ?? ''}${text(it.content)}`;
      else messages.push({ role: it.role, content: text(it.content) });
    }
  }
  return { model: b.model, stream: b.stream, messages, tools: b.tools };
}

/** Sends the scripted turn as a Responses answer; returns its usage in the chat spelling. */
export function answerResponses(res: ServerResponse, body: RecordedRequest['body'], turn: number, t: ScriptedTurn, promptTokens: number): ReportedUsage {
  const output: object[] = [];
  if (t.content) output.push({ type: 'message', id: `msg_${turn}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: t.content, annotations: [] }] });
  (t.toolCalls ?? []).forEach((c, i) => {
    const args = typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments);
    output.push({ type: 'function_call', id: `fc_${turn}_${i}`, call_id: c.id ?? `call_${turn}_${i}`, name: c.name, arguments: args, status: 'completed' });
  });
  if (output.length === 0) output.push({ type: 'message', id: `msg_${turn}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: '', annotations: [] }] });
  const completionTokens = 3 + (t.content?.length ?? 0) + (t.toolCalls?.length ?? 0) * 7;
  const cached = turn > 0 ? 10 + (body.messages.length - 1) * 2 : 0;
  const usage = {
    input_tokens: promptTokens,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: promptTokens + completionTokens,
  };
  const response = { id: `resp_${turn}`, object: 'response', created_at: 1_700_000_000, status: 'completed', model: body.model, output, usage };
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(response));
  } else {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let seq = 0;
    const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
    const parts = [event('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } })];
    output.forEach((item, index) => {
      const it = item as { type: string; content?: Array<{ text: string }> };
      parts.push(event('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress' } }));
      if (it.type === 'message' && it.content?.[0]?.text) parts.push(event('response.output_text.delta', { output_index: index, content_index: 0, delta: it.content[0].text }));
      parts.push(event('response.output_item.done', { output_index: index, item }));
    });
    parts.push(event('response.completed', { response }));
    res.end(parts.join(''));
  }
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens, prompt_tokens_details: { cached_tokens: cached } };
}
