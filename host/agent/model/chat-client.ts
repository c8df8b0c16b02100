import type OpenAI from 'openai';
import { openAiModule } from './openai-module';
import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import { classifyModelError, ModelCallError } from './model-errors';
import type { ChatRequest, ModelReply, ModelToolCall, ModelUsage } from './model-types';

export interface ChatCallOptions {
  signal: AbortSignal;
  /** Whole-request limit: connecting, waiting and streaming. */
  timeoutMs: number;
  /** Each streamed text fragment as it arrives (live output only; nothing durable). */
  onDelta?: (text: string) => void;
}

/** The one call the generation task makes. A port, so unit tests of pure logic can stand in for it. */
export interface ChatClient {
  complete(req: ChatRequest, o: ChatCallOptions): Promise<ModelReply>;
}

const usageOf = (u: OpenAI.CompletionUsage | null | undefined): ModelUsage | null =>
  u
    ? { promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens, totalTokens: u.total_tokens, ...(typeof u.prompt_tokens_details?.cached_tokens === 'number' ? { cachedTokens: u.prompt_tokens_details.cached_tokens } : {}) }
    : null;

/** A reply from one whole (not streamed) completion. */
function whole(r: OpenAI.ChatCompletion): ModelReply {
  const choice = r.choices[0];
  const calls: ModelToolCall[] = (choice?.message.tool_calls ?? []).flatMap((c) => (c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : []));
  return { content: choice?.message.content ?? null, toolCalls: calls, finishReason: choice?.finish_reason ?? 'stop', model: r.model, responseId: r.id ?? null, usage: usageOf(r.usage) };
}

/**
 * Chat Completions through the `openai` client against any compatible endpoint. The client's own
 * retries are off: retries are durable task state (the generation task's retry phase), not a loop
 * hidden in memory. Every failure comes out as a {@link ModelCallError} carrying any text that
 * streamed before it.
 */
export function openAiChatClient(o: { baseUrl: string; apiKey: () => string }): ChatClient {
  return {
    async complete(req, call) {
      const timeout = AbortSignal.timeout(call.timeoutMs);
      const signal = AbortSignal.any([call.signal, timeout]);
      const { default: OpenAIClient } = await openAiModule();
      const client = new OpenAIClient({ baseURL: o.baseUrl, apiKey: o.apiKey(), maxRetries: 0, timeout: call.timeoutMs });
      const body: ChatCompletionCreateParamsBase = {
        model: req.model,
        messages: req.messages as ChatCompletionCreateParamsBase['messages'],
        ...(req.tools.length ? { tools: req.tools } : {}),
        ...(req.temperature === undefined ? {} : { temperature: req.temperature }),
        ...(req.maxTokens === undefined ? {} : { max_tokens: req.maxTokens }),
      };
      let partial = '';
      try {
        if (!req.stream) return whole(await client.chat.completions.create({ ...body, stream: false }, { signal }));
        const { data: stream, response } = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal }).withResponse();
        // A server that ignores `stream: true` answers with one JSON completion, not events: read
        // as a stream it has no chunk, and the answer looked cut off on every retry.
        if (/^application\/json\b/i.test(response.headers.get('content-type') ?? '')) {
          const r = (await response.json()) as OpenAI.ChatCompletion;
          if (!Array.isArray(r?.choices)) throw new ModelCallError('model_bad_response', `the server answered a streamed request with JSON that is not a completion: ${JSON.stringify(r).slice(0, 200)}`, { retryable: false });
          const reply = whole(r);
          if (reply.content) call.onDelta?.(reply.content);
          return reply;
        }
        const calls = new Map<number, ModelToolCall>();
        let finishReason: string | null = null;
        let model = req.model;
        let responseId: string | null = null;
        let usage: ModelUsage | null = null;
        for await (const chunk of stream) {
          model = chunk.model || model;
          responseId ??= chunk.id ?? null;
          if (chunk.usage) usage = usageOf(chunk.usage);
          for (const choice of chunk.choices ?? []) {
            const d = choice.delta;
            if (d?.content) {
              partial += d.content;
              call.onDelta?.(d.content);
            }
            for (const t of d?.tool_calls ?? []) {
              const c = calls.get(t.index) ?? { id: '', name: '', arguments: '' };
              if (t.id) c.id = t.id;
              if (t.function?.name) c.name += t.function.name;
              if (t.function?.arguments) c.arguments += t.function.arguments;
              calls.set(t.index, c);
            }
            if (choice.finish_reason) finishReason = choice.finish_reason;
          }
        }
        // A body that ends without a finish reason was cut off, however politely the socket closed.
        if (finishReason === null) throw new ModelCallError('model_stream_incomplete', 'the streamed answer ended before the model finished', { retryable: true, partialText: partial });
        const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c);
        return { content: partial === '' && toolCalls.length ? null : partial, toolCalls, finishReason, model, responseId, usage };
      } catch (err) {
        if (err instanceof ModelCallError) throw err;
        if (timeout.aborted && !call.signal.aborted) {
          throw new ModelCallError('model_timeout', `no complete answer within ${call.timeoutMs} ms`, { retryable: true, partialText: partial, cause: err });
        }
        throw classifyModelError(err, partial, call.signal, shownEndpoint(o.baseUrl));
      }
    },
  };
}

/**
 * The endpoint as an error may name it (it is recorded with the run): without credentials in its
 * user part or its query (`?api-key=...`, as some gateways take them), which must never reach the store.
 */
export function shownEndpoint(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(the configured base URL)';
  }
}
