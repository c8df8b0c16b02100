/** Token counts of one answer, as the provider reported them. */
export interface GatewayUsage {
  prompt: number;
  completion: number;
  /** Prompt tokens served from the provider's cache (part of `prompt`). */
  cached: number;
}

type Reported = {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  input_tokens?: unknown;
  output_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  input_tokens_details?: { cached_tokens?: unknown } | null;
};

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/** Chat Completions (`prompt_tokens`) and Responses (`input_tokens`) spellings alike. */
function fromReported(u: Reported | null | undefined): GatewayUsage | undefined {
  if (!u || typeof u !== 'object') return undefined;
  const prompt = count(u.prompt_tokens) ?? count(u.input_tokens);
  const completion = count(u.completion_tokens) ?? count(u.output_tokens);
  if (prompt === undefined && completion === undefined) return undefined;
  const cached = count(u.prompt_tokens_details?.cached_tokens) ?? count(u.input_tokens_details?.cached_tokens) ?? 0;
  return { prompt: prompt ?? 0, completion: completion ?? 0, cached };
}

type Answer = { usage?: Reported | null; model?: unknown; response?: { usage?: Reported | null; model?: unknown } };

/**
 * The usage and model an answer reports: a JSON body's `usage`, or for a stream (SSE) the last
 * event carrying one (a Chat Completions stream's final chunk, a Responses stream's
 * `response.completed`). Undefined when the answer reports none (a dropped stream).
 */
export function usageOf(text: string, contentType: string | undefined): { usage: GatewayUsage | undefined; model: string | undefined } {
  const parse = (s: string): Answer | undefined => {
    try {
      return JSON.parse(s) as Answer;
    } catch {
      return undefined;
    }
  };
  let usage: GatewayUsage | undefined;
  let model: string | undefined;
  const take = (a: Answer) => {
    usage ??= fromReported(a.usage) ?? fromReported(a.response?.usage);
    const m = a.model ?? a.response?.model;
    if (model === undefined && typeof m === 'string' && m) model = m;
  };
  if (contentType?.includes('text/event-stream')) {
    // The last event that reports each wins, so events are read from the end, and only until both
    // are found: a long stream's deltas (one JSON text each) are not parsed at all.
    const lines = text.split('\n');
    for (let i = lines.length - 1; i >= 0 && (usage === undefined || model === undefined); i--) {
      const line = lines[i]!;
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data && data !== '[DONE]') {
        const a = parse(data);
        if (a) take(a);
      }
    }
  } else {
    const a = parse(text);
    if (a) take(a);
  }
  return { usage, model };
}
