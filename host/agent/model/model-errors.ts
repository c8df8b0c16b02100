import type { APIError } from 'openai';
import { openAiModuleIfLoaded } from './openai-module';
import { BerthError } from '../../errors';

/** Why a model request did not produce a complete answer. */
export type ModelFailure =
  | 'model_rate_limited'
  | 'model_server_error'
  | 'model_timeout'
  | 'model_connection'
  | 'model_stream_incomplete'
  | 'model_rejected'
  /** The server answered with something that is not a completion (JSON of another shape). */
  | 'model_bad_response'
  /** The endpoint refused the prompt as longer than its window (llama.cpp `exceed_context_size_error`, OpenAI `context_length_exceeded`). */
  | 'model_context_overflow'
  | 'model_aborted';

/**
 * A failed model request. `partialText` is what streamed before it failed: kept as an
 * interruption record, never used as an answer. `retryAfterMs` is the server's own wish.
 */
export class ModelCallError extends BerthError {
  readonly failure: ModelFailure;
  readonly partialText: string;
  readonly status: number | null;
  readonly retryAfterMs: number | null;
  /** For `model_context_overflow`: the sizes the endpoint stated, when it did. */
  readonly window: { contextTokens: number; promptTokens: number | null } | null;

  constructor(failure: ModelFailure, message: string, o: { retryable: boolean; partialText?: string; status?: number | null; retryAfterMs?: number | null; cause?: unknown; window?: { contextTokens: number; promptTokens: number | null } }) {
    super(failure, message, { retryable: o.retryable, cause: o.cause, details: { status: o.status ?? null } });
    this.failure = failure;
    this.partialText = o.partialText ?? '';
    this.status = o.status ?? null;
    this.retryAfterMs = o.retryAfterMs ?? null;
    this.window = o.window ?? null;
  }
}

/**
 * What the transport said under the client's "Connection error.": the code (and address) deepest
 * in the cause chain, e.g. ` (ECONNREFUSED 127.0.0.1:59999)`, else its innermost message, `` when none. The operator
 * needs it to tell a server that is down from a name that does not resolve or a TLS refusal.
 */
export function transportCause(err: unknown): string {
  let found: { code: string; address?: unknown; port?: unknown; hostname?: unknown } | undefined;
  let deepest = '';
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (depth > 0) deepest = e.message;
    const inner = e instanceof AggregateError ? e.errors[0] : undefined;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') found = e as unknown as typeof found;
    if (inner instanceof Error && typeof (inner as { code?: unknown }).code === 'string') found = inner as unknown as typeof found;
  }
  // No code: the innermost message says it (undici's 'bad port' for a port fetch refuses to use),
  // unless it quotes a URL: undici's refusal of a URL with credentials quotes them, and this
  // message is recorded with the run.
  if (!found) return deepest && deepest !== 'fetch failed' && !deepest.includes('://') && deepest.length <= 80 ? ` (${deepest})` : '';
  const where = typeof found.address === 'string' ? ` ${found.address}${found.port !== undefined ? `:${String(found.port)}` : ''}` : typeof found.hostname === 'string' ? ` ${found.hostname}` : '';
  return ` (${found.code}${where})`;
}

function retryAfter(headers: Headers | undefined): number | null {
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms >= 0 && headers?.get('retry-after-ms') !== null) return ms;
  const s = headers?.get('retry-after');
  if (s == null) return null;
  const n = Number(s);
  if (Number.isFinite(n)) return Math.max(0, n * 1000);
  const at = Date.parse(s);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : null;
}

/**
 * Maps whatever the `openai` client threw to a typed failure: 429, 5xx, timeouts and dropped
 * connections are retryable; other 4xx are the request's fault and are not; an abort is the
 * host stopping, which recovery handles, so it is not retried here either.
 */
export function classifyModelError(err: unknown, partialText: string, signal?: AbortSignal, endpoint?: string): ModelCallError {
  const msg = err instanceof Error ? err.message : String(err);
  // The client's error classes; none is loaded before a request was made (no such error exists then).
  const api = openAiModuleIfLoaded();
  const is = <C extends abstract new (...a: never[]) => unknown>(c: C | undefined): boolean => c !== undefined && err instanceof c;
  if (signal?.aborted || is(api?.APIUserAbortError)) {
    return new ModelCallError('model_aborted', 'the request was aborted (host stopping or task cancelled)', { retryable: false, partialText, cause: err });
  }
  if (is(api?.APIConnectionTimeoutError)) return new ModelCallError('model_timeout', `model request timed out: ${msg}`, { retryable: true, partialText, cause: err });
  if (is(api?.APIConnectionError)) return new ModelCallError('model_connection', `connection to the model endpoint${endpoint ? ` ${endpoint}` : ''} failed: ${msg}${transportCause(err)}`, { retryable: true, partialText, cause: err });
  if (is(api?.APIError) && typeof (err as APIError).status === 'number') {
    const e = err as APIError & { status: number };
    const status = e.status;
    const headers = e.headers as Headers | undefined;
    if (status === 429) return new ModelCallError('model_rate_limited', `rate limited (429): ${msg}`, { retryable: true, partialText, status, retryAfterMs: retryAfter(headers), cause: err });
    if (status >= 500) return new ModelCallError('model_server_error', `model endpoint error (${status}): ${msg}`, { retryable: true, partialText, status, retryAfterMs: retryAfter(headers), cause: err });
    if (status === 408 || status === 409) return new ModelCallError('model_server_error', `model endpoint asked to retry (${status}): ${msg}`, { retryable: true, partialText, status, cause: err });
    const body = (err as APIError & { error?: { type?: string; code?: string; n_prompt_tokens?: number; n_ctx?: number } }).error;
    if (status === 400 && (body?.type === 'exceed_context_size_error' || body?.code === 'context_length_exceeded' || e.code === 'context_length_exceeded')) {
      const window = statedWindow(body, msg);
      const sizes = window ? ` (${window.promptTokens ?? '?'} prompt tokens, window ${window.contextTokens})` : '';
      return new ModelCallError('model_context_overflow', `the request is longer than the model's context window${sizes}: ${msg}`, { retryable: false, partialText, status, cause: err, ...(window ? { window } : {}) });
    }
    return new ModelCallError('model_rejected', `model endpoint refused the request (${status}): ${msg}`, { retryable: false, partialText, status, cause: err });
  }
  // Anything else came out of a response body that broke off (socket closed, bad chunk).
  return new ModelCallError('model_connection', `model response broke off: ${msg}`, { retryable: true, partialText, cause: err });
}

/** The window an overflow refusal states: llama.cpp's `n_ctx`/`n_prompt_tokens`, or OpenAI's "maximum context length is N tokens ... resulted in M tokens". */
function statedWindow(body: { n_prompt_tokens?: number; n_ctx?: number } | undefined, msg: string): { contextTokens: number; promptTokens: number | null } | null {
  if (typeof body?.n_ctx === 'number' && body.n_ctx > 0) return { contextTokens: body.n_ctx, promptTokens: typeof body.n_prompt_tokens === 'number' ? body.n_prompt_tokens : null };
  const max = /maximum context length is (\d+) tokens/.exec(msg);
  if (!max) return null;
  const used = /resulted in (\d+) tokens/.exec(msg);
  return { contextTokens: Number(max[1]), promptTokens: used ? Number(used[1]) : null };
}
