import { BerthError } from '../../errors';
import type { ChatClient } from './chat-client';
import type { ModelConfig } from './model-config';
import type { ChatMessage, ModelReply } from './model-types';

/**
 * The endpoint of a "model" whose every turn the caller dictates (an MCP client, an SDK adapter):
 * each run's user message names one tool call, the first turn makes exactly that call, the next
 * one ends the run with the call's result. The turns are a pure function of the committed entries,
 * so any host that resumes such a run (a restarted server, `berth resume`, a worker) carries it
 * on without the caller being there, and a crash in between is settled by the tool task's replay
 * policy like any other call.
 */
export const CALLER_DRIVEN_URL = 'berth://caller';

/** The one call a caller-driven run makes, as its user message carries it. */
export interface DictatedCall {
  id: string;
  tool: string;
  arguments: Record<string, unknown>;
}

const TAG = 'berth.dictated-call';

export function dictatedMessage(call: DictatedCall): string {
  return JSON.stringify({ [TAG]: call });
}

export function parseDictated(text: string): DictatedCall | null {
  try {
    const v = JSON.parse(text) as Record<string, DictatedCall> | null;
    const c = v?.[TAG];
    return c && typeof c.id === 'string' && typeof c.tool === 'string' && c.arguments && typeof c.arguments === 'object' ? c : null;
  } catch {
    return null;
  }
}

export const isCallerDriven = (cfg: Pick<ModelConfig, 'baseUrl'>) => cfg.baseUrl === CALLER_DRIVEN_URL;

const reply = (content: string | null, toolCalls: ModelReply['toolCalls']): ModelReply => ({
  content,
  toolCalls,
  finishReason: toolCalls.length ? 'tool_calls' : 'stop',
  model: 'caller',
  responseId: null,
  usage: null,
});

/** Replies from the conversation alone: the dictated call after its user message, the final answer after its result. */
export function callerDrivenChatClient(): ChatClient {
  return {
    async complete(req) {
      const last: ChatMessage | undefined = req.messages.at(-1);
      if (last?.role === 'user') {
        const call = parseDictated(last.content);
        if (!call) return reply('error: this session takes dictated calls only; the message names none', []);
        return reply(null, [{ id: call.id, name: call.tool, arguments: JSON.stringify(call.arguments) }]);
      }
      return reply(last?.role === 'tool' ? 'done' : null, []);
    },
  };
}

/**
 * A message that does not fit the session's kind, said with what to do instead: free text
 * (`berth chat`, the web view) to a session whose calls an MCP client dictates has no model to
 * answer it (`berth chat` used to fail on the absent key of that non-model, `api_key_missing`), and
 * a dictated call (`berth mcp --session`) to a session a model drives would be read by the model
 * as a user message. Null when the message fits.
 */
export function wrongSessionKind(sessionId: string, model: Pick<ModelConfig, 'baseUrl'>, message: string): BerthError | null {
  const dictated = parseDictated(message) !== null;
  if (isCallerDriven(model) && !dictated) {
    return new BerthError(
      'session_caller_driven',
      `session ${sessionId} was created by berth mcp: its calls come from an MCP client, one tool call at a time, and there is no model to send a message to. ` +
        `Continue it from an MCP client (berth mcp --session ${sessionId}); its calls are listed by berth status and shown by berth logs RUN`,
      { ids: { sessionId } },
    );
  }
  if (!isCallerDriven(model) && dictated) {
    return new BerthError(
      'session_model_driven',
      `session ${sessionId} is an agent session driven by a model (${model.baseUrl}), not by an MCP client: berth mcp makes calls only in sessions it created. Continue it with berth chat ${sessionId} MESSAGE, or fork it (berth fork ${sessionId} --at TURN)`,
      { ids: { sessionId } },
    );
  }
  return null;
}
