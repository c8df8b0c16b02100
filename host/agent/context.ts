import type { Entry } from '../model';
import { capText, type AnyTool } from '../../tools';
import type { AgentSettings } from './agent-input';
import { ENTRY, type ModelEntry, type ToolResultEntry, type UserEntry } from './entries';
import type { ChatMessage } from './model';

export interface ContextOptions {
  systemPrompt: string;
  tools: ReadonlyMap<string, AnyTool>;
  compaction: AgentSettings['compaction'];
}

/** Arguments sent back to the endpoint: the model's own text when it is JSON, else `{}` (the tool result explains). */
function echoArguments(raw: string): string {
  try {
    JSON.parse(raw);
    return raw;
  } catch {
    return '{}';
  }
}

/**
 * The Chat Completions messages for a session, rebuilt from committed entries only (never from
 * memory), in entry order. Interruption and approval records are not part of the conversation.
 *
 * Each assistant message is followed by one tool message per call it made, in the order of its
 * calls, whatever order the results were committed in; a call without a committed result (a run
 * that ended mid-turn) is answered with a note saying so, because the API requires an answer.
 *
 * Compaction, applied here and never to the store: tool results of the newest
 * `keepRecentTurns` model turns are cut to their tool's `contextCap`; older ones to
 * `oldOutputChars`, with a note naming the entry that holds the whole output.
 */
export function buildContext(entries: Entry[], o: ContextOptions): ChatMessage[] {
  const results = new Map<string, { entry: Entry; body: ToolResultEntry }>();
  for (const e of entries) {
    if (e.kind === ENTRY.toolResult) {
      const body = e.body as unknown as ToolResultEntry;
      results.set(body.toolCallId, { entry: e, body });
    }
  }
  const turns = entries.filter((e) => e.kind === ENTRY.model && (e.body as unknown as ModelEntry).toolCalls.length > 0);
  const recentFrom = turns.length - o.compaction.keepRecentTurns;
  const messages: ChatMessage[] = [{ role: 'system', content: o.systemPrompt }];
  let turnIndex = 0;
  for (const e of entries) {
    if (e.kind === ENTRY.user) messages.push({ role: 'user', content: (e.body as unknown as UserEntry).text });
    if (e.kind !== ENTRY.model) continue;
    const m = e.body as unknown as ModelEntry;
    if (m.toolCalls.length === 0) {
      messages.push({ role: 'assistant', content: m.content ?? '' });
      continue;
    }
    const recent = turnIndex >= recentFrom;
    turnIndex += 1;
    messages.push({
      role: 'assistant',
      content: m.content,
      tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: echoArguments(c.arguments) } })),
    });
    for (const c of m.toolCalls) {
      const r = results.get(c.id);
      if (!r) {
        messages.push({ role: 'tool', tool_call_id: c.id, content: 'no result was recorded for this call: the run ended before it finished; its effect is unknown' });
        continue;
      }
      messages.push({ role: 'tool', tool_call_id: c.id, content: shown(r.body, r.entry.id, recent, o) });
    }
  }
  return messages;
}

function shown(r: ToolResultEntry, entryId: string, recent: boolean, o: ContextOptions): string {
  const label = r.status === 'ok' ? '' : `[${r.status}] `;
  const text = label + r.content;
  const cap = recent ? (o.tools.get(r.name)?.contextCap ?? 8_000) : o.compaction.oldOutputChars;
  const capped = capText(text, cap);
  if (!capped.truncated) return text;
  return `${capped.text}\n[output shortened for the context; the whole output is entry ${entryId}]`;
}
