/**
 * An OpenAI-compatible scripted model on loopback (`POST /v1/chat/completions`, and the Responses
 * API `POST /v1/responses` through `model-server-responses.ts`), so tests drive
 * the real `openai` client end to end. The answer is chosen by the number of assistant messages
 * in the request (the turn), not by a call counter, so a host that dies and asks again gets the
 * same answer. Faults are served once per turn (and per `faultKey`) before the real answer:
 * `429` (with retry-after-ms), `500`, `drop` (some streamed text, then the socket is destroyed),
 * `hang` (no answer until the server closes). Both streaming (SSE, `data: ...`, `[DONE]`) and
 * plain JSON answers follow the request's `stream` flag.
 *
 * With `contextTokens` the server has a window, as llama.cpp's `llama-server -c N` does: a request
 * whose prompt counts more tokens is refused with llama.cpp's 400 (`exceed_context_size_error`,
 * with `n_prompt_tokens` and `n_ctx`), and answers report the counted prompt tokens. The count
 * ({@link countPromptTokens}) renders the messages and tools like a chat template and takes 4
 * bytes a token, plus 4 per message; an agent's estimate must not be below it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerResponses, asChatBody, type ResponsesBody } from './model-server-responses';

export interface ScriptedCall {
  name: string;
  /** An object is sent as JSON; a string is sent as is (so a test can send broken JSON). */
  arguments: string | Record<string, unknown>;
  id?: string;
}

export type ScriptedFault = '429' | '500' | 'drop' | 'hang';

export interface ScriptedTurn {
  content?: string;
  toolCalls?: ScriptedCall[];
  faults?: ScriptedFault[];
}

export interface RecordedRequest {
  turn: number;
  body: { model: string; stream?: boolean; messages: Array<{ role: string; content?: string | null; tool_call_id?: string; tool_calls?: unknown[] }>; tools?: unknown[] };
  authorization: string | undefined;
  servedFault: ScriptedFault | null;
  /** The prompt's tokens as the server counted them (see {@link countPromptTokens}). */
  promptTokens: number;
  /** Refused as longer than the window (`contextTokens`). */
  overflow: boolean;
}

/** Token counts as the server reported them in an answer. */
export interface ReportedUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

export interface ModelServer {
  /** Base URL for the client, ending in `/v1`. */
  url: string;
  requests: RecordedRequest[];
  /** The usage of every complete answer sent, in order (what a client can count). */
  reported: ReportedUsage[];
  close(): Promise<void>;
}

type Script = ScriptedTurn[] | ((turn: number, body: RecordedRequest['body']) => ScriptedTurn);

export interface ModelServerOptions {
  faultKey?: (body: RecordedRequest['body']) => string;
  /** The window: a prompt counting more tokens is refused with llama.cpp's context-size error. */
  contextTokens?: number;
  /** Which turn a request is (default: its number of assistant messages, which a compacted context no longer shows). */
  turnOf?: (body: RecordedRequest['body']) => number;
  /** Answers plain JSON even to `stream: true`, as some OpenAI-compatible servers do. */
  ignoreStream?: boolean;
}

/** A chat template's rendering, roughly: role markers, contents, calls and the tool schemas; 4 bytes a token plus 4 per message. */
export function countPromptTokens(body: RecordedRequest['body']): number {
  let bytes = Buffer.byteLength(JSON.stringify(body.tools ?? []));
  for (const m of body.messages) bytes += Buffer.byteLength(`<|${m.role}|>${m.content ?? ''}${m.tool_call_id ?? ''}${m.tool_calls ? JSON.stringify(m.tool_calls) : ''}`);
  return Math.ceil(bytes / 4) + 4 * body.messages.length;
}

/** Turn of a request whose older turns may be left out: one past the turn named by its newest call id (`call_TURN_I`, as this server makes them). */
export function turnFromCallIds(body: RecordedRequest['body']): number {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const calls = body.messages[i]!.tool_calls as Array<{ id: string }> | undefined;
    const m = calls?.length ? /^call_(\d+)_/.exec(calls[0]!.id) : null;
    if (m) return Number(m[1]) + 1;
  }
  return body.messages.filter((m) => m.role === 'assistant').length;
}

export async function startModelServer(script: Script, o: ModelServerOptions = {}): Promise<ModelServer> {
  const requests: RecordedRequest[] = [];
  const reported: ReportedUsage[] = [];
  const faultsServed = new Map<string, number>();
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const responsesApi = req.url?.endsWith('/responses') === true;
      if (req.method !== 'POST' || !(req.url?.endsWith('/chat/completions') || responsesApi)) {
        res.writeHead(404).end();
        return;
      }
      const body = responsesApi ? asChatBody(JSON.parse(raw) as ResponsesBody) : (JSON.parse(raw) as RecordedRequest['body']);
      const turn = o.turnOf ? o.turnOf(body) : body.messages.filter((m) => m.role === 'assistant').length;
      const promptTokens = countPromptTokens(body);
      if (o.contextTokens !== undefined && promptTokens > o.contextTokens) {
        requests.push({ turn, body, authorization: req.headers.authorization, servedFault: null, promptTokens, overflow: true });
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 400, message: 'the request exceeds the available context size, try increasing it', type: 'exceed_context_size_error', n_prompt_tokens: promptTokens, n_ctx: o.contextTokens } }));
        return;
      }
      const scripted = typeof script === 'function' ? script(turn, body) : script[turn];
      const key = `${o.faultKey?.(body) ?? ''}#${turn}`;
      const served = faultsServed.get(key) ?? 0;
      const fault = scripted?.faults?.[served] ?? null;
      if (fault) faultsServed.set(key, served + 1);
      requests.push({ turn, body, authorization: req.headers.authorization, servedFault: fault, promptTokens, overflow: false });
      if (!scripted) return error(res, 400, `the script has no answer for turn ${turn}`);
      if (fault === '429') return error(res, 429, 'rate limited (scripted)', { 'retry-after-ms': '50' });
      if (fault === '500') return error(res, 500, 'server error (scripted)');
      if (fault === 'hang') {
        hanging.add(res);
        return;
      }
      const usage = responsesApi
        ? answerResponses(res, body, turn, scripted, o.contextTokens !== undefined ? promptTokens : 10 + body.messages.length * 5)
        : answer(req, res, o.ignoreStream ? { ...body, stream: false } : body, turn, scripted, fault === 'drop', o.contextTokens !== undefined ? promptTokens : undefined);
      if (usage) reported.push(usage);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    reported,
    close: () =>
      new Promise<void>((r) => {
        for (const h of hanging) h.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function error(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ error: { message, type: status === 429 ? 'rate_limit_exceeded' : 'server_error', code: null } }));
}

const argsText = (a: ScriptedCall['arguments']) => (typeof a === 'string' ? a : JSON.stringify(a));

/** Sends the answer; returns the usage it reported (none for a dropped stream). */
function answer(_req: IncomingMessage, res: ServerResponse, body: RecordedRequest['body'], turn: number, t: ScriptedTurn, drop: boolean, counted?: number): ReportedUsage | null {
  const calls = (t.toolCalls ?? []).map((c, i) => ({ id: c.id ?? `call_${turn}_${i}`, type: 'function' as const, function: { name: c.name, arguments: argsText(c.arguments) } }));
  const content = t.content ?? (calls.length ? null : '');
  const finish = calls.length ? 'tool_calls' : 'stop';
  const promptTokens = counted ?? 10 + body.messages.length * 5;
  const completionTokens = 3 + (content?.length ?? 0) + calls.length * 7;
  // From the second turn on, the earlier turns' prompt is what a caching endpoint would have cached.
  const cached = turn > 0 ? 10 + (body.messages.length - 1) * 2 : 0;
  const usage: ReportedUsage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens, prompt_tokens_details: { cached_tokens: cached } };
  const id = `chatcmpl-${turn}`;
  const created = 1_700_000_000;
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id, object: 'chat.completion', created, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content, ...(calls.length ? { tool_calls: calls } : {}) }, finish_reason: finish }], usage }));
    return usage;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const chunk = (delta: object, finishReason: string | null = null) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;
  const parts: string[] = [chunk({ role: 'assistant', content: '' })];
  const text = content ?? '';
  const third = Math.max(1, Math.ceil(text.length / 3));
  for (let i = 0; i < text.length; i += third) parts.push(chunk({ content: text.slice(i, i + third) }));
  calls.forEach((c, index) => {
    const half = Math.ceil(c.function.arguments.length / 2);
    parts.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments.slice(0, half) } }] }));
    parts.push(chunk({ tool_calls: [{ index, function: { arguments: c.function.arguments.slice(half) } }] }));
  });
  if (drop) {
    // Some text reaches the client, then the connection dies mid-answer.
    res.write(parts.slice(0, Math.max(2, Math.ceil(parts.length / 2))).join(''));
    setTimeout(() => res.socket?.destroy(), 20);
    return null;
  }
  parts.push(chunk({}, finish));
  parts.push(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [], usage })}\n\n`);
  parts.push('data: [DONE]\n\n');
  res.end(parts.join(''));
  return usage;
}
