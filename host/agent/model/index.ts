/** The model client: Chat Completions with tools over the `openai` package, typed failures, no hidden retries. */
export { ModelConfigSchema, type ModelConfig, type ModelConfigInput } from './model-config';
export { readApiKey } from './api-key';
export { openAiChatClient, type ChatClient, type ChatCallOptions } from './chat-client';
export { ModelCallError, classifyModelError, type ModelFailure } from './model-errors';
export type { ChatMessage, ChatRequest, ModelReply, ModelToolCall, ModelUsage } from './model-types';
export { backoffMs } from './backoff';
export { CALLER_DRIVEN_URL, callerDrivenChatClient, dictatedMessage, parseDictated, isCallerDriven, wrongSessionKind, type DictatedCall } from './caller-driven';
