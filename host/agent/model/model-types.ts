/** One function call the model asked for; `arguments` is the raw JSON text as the model sent it. */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** Token counts the endpoint reported for one request. */
export interface ModelUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Prompt tokens served from the endpoint's cache (`prompt_tokens_details.cached_tokens`), when it reports them. */
  cachedTokens?: number;
}

/** A complete answer of one request. */
export interface ModelReply {
  content: string | null;
  toolCalls: ModelToolCall[];
  finishReason: string;
  model: string;
  responseId: string | null;
  usage: ModelUsage | null;
}

/** A message of the Chat Completions conversation, as Berth builds it from entries. */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> }
  | { role: 'tool'; tool_call_id: string; content: string };

/** Everything one request sends (the key excepted). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools: Array<{ type: 'function'; function: { name: string; description: string; parameters: Record<string, unknown> } }>;
  stream: boolean;
  temperature?: number;
  maxTokens?: number;
}
