import type { Entry } from '../model';
import { capText, type AnyTool } from '../../tools';
import type { AgentSettings } from './agent-input';
import { ENTRY, type CompactionEntry, type ModelEntry, type ToolResultEntry, type UserEntry } from './entries';
import type { ChatMessage } from './model';

export interface ContextOptions {
  systemPrompt: string;
  tools: ReadonlyMap<string, AnyTool>;
  compaction: Pick<AgentSettings['compaction'], 'keepRecentTurns' | 'oldOutputChars'>;
  /** A cut to apply instead of the newest compaction entry (the planner tries cuts before recording one). */
  cut?: Cut;
}

/** How many of the oldest model turns are shown with stubbed tool results, and how many are left out. */
export interface Cut {
  stubbedTurns: number;
  droppedTurns: number;
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

/** The cut the newest compaction entry among `entries` records (none: nothing is cut). */
export function recordedCut(entries: Entry[]): Cut {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (e.kind !== ENTRY.compaction) continue;
    const b = e.body as unknown as CompactionEntry;
    return { stubbedTurns: b.stubbedTurns, droppedTurns: b.droppedTurns };
  }
  return { stubbedTurns: 0, droppedTurns: 0 };
}

/**
 * The Chat Completions messages for a session, rebuilt from committed entries only (never from
 * memory), in entry order. Interruption, approval and compaction records are not part of the
 * conversation.
 *
 * Each assistant message is followed by one tool message per call it made, in the order of its
 * calls, whatever order the results were committed in; a call without a committed result (a run
 * that ended mid-turn) is answered with a note saying so, because the API requires an answer.
 *
 * Two kinds of shortening, both views (the store keeps every entry whole):
 * - always: tool results of the newest `keepRecentTurns` model turns are cut to their tool's
 *   `contextCap`; older ones to `oldOutputChars`, with a note naming the call whose result holds it all;
 * - the newest `agent.compaction` entry's cut (see {@link CompactionEntry}): the oldest turns left
 *   out, the results of the next ones replaced by stubs, and a note saying so in the system prompt.
 */
export function buildContext(entries: Entry[], o: ContextOptions): ChatMessage[] {
  const cut = o.cut ?? recordedCut(entries);
  const results = new Map<string, { entry: Entry; body: ToolResultEntry }>();
  let firstUser: Entry | undefined;
  let newestUser: Entry | undefined;
  let models = 0;
  let turns = 0;
  for (const e of entries) {
    if (e.kind === ENTRY.toolResult) {
      const body = e.body as unknown as ToolResultEntry;
      results.set(body.toolCallId, { entry: e, body });
    }
    if (e.kind === ENTRY.user) (firstUser ??= e, (newestUser = e));
    if (e.kind === ENTRY.model) {
      models += 1;
      if ((e.body as unknown as ModelEntry).toolCalls.length > 0) turns += 1;
    }
  }
  const recentFrom = turns - o.compaction.keepRecentTurns;
  const messages: ChatMessage[] = [{ role: 'system', content: o.systemPrompt + cutNote(cut, models) }];
  let turnIndex = 0;
  let modelIndex = 0;
  for (const e of entries) {
    if (e.kind === ENTRY.user) {
      // A user message among left-out turns goes too, except the task (the first) and the current request (the newest).
      if (modelIndex < cut.droppedTurns && e !== firstUser && e !== newestUser) continue;
      messages.push({ role: 'user', content: (e.body as unknown as UserEntry).text });
    }
    if (e.kind !== ENTRY.model) continue;
    const m = e.body as unknown as ModelEntry;
    const position = modelIndex;
    modelIndex += 1;
    const recent = m.toolCalls.length > 0 && turnIndex >= recentFrom;
    if (m.toolCalls.length > 0) turnIndex += 1;
    if (position < cut.droppedTurns) continue;
    if (m.toolCalls.length === 0) {
      messages.push({ role: 'assistant', content: m.content ?? '' });
      continue;
    }
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
      const text = shown(r.body, recent, o);
      messages.push({ role: 'tool', tool_call_id: c.id, content: position < cut.stubbedTurns ? stubbed(r.body, text) : text });
    }
  }
  return messages;
}

function cutNote(cut: Cut, models: number): string {
  if (cut.stubbedTurns === 0 && cut.droppedTurns === 0) return '';
  const dropped = Math.min(cut.droppedTurns, models);
  const stubbed = Math.max(0, Math.min(cut.stubbedTurns, models) - dropped);
  const parts = [
    dropped ? `the oldest ${dropped} assistant turns of this session (with their tool results, and the user messages among them except the first and the newest) are left out` : '',
    stubbed ? `the tool results of the ${stubbed} turns after them are replaced by short stubs` : '',
  ].filter(Boolean);
  return `\n\n[Context note: to fit the model's context window, ${parts.join(', and ')}. The session's record keeps every entry whole.]`;
}

function stubbed(r: ToolResultEntry, text: string): string {
  const stub = `[${r.name} result (${r.status}, ${Buffer.byteLength(r.content)} bytes) left out to fit the context; the session's record keeps it: call ${r.toolCallId}]`;
  // A stub never makes a result longer: shortening is then monotone in the cut, which the planner relies on.
  return stub.length < text.length ? stub : text;
}

function shown(r: ToolResultEntry, recent: boolean, o: ContextOptions): string {
  const label = r.status === 'ok' ? '' : `[${r.status}] `;
  const text = label + r.content;
  const cap = recent ? (o.tools.get(r.name)?.contextCap ?? 8_000) : o.compaction.oldOutputChars;
  const capped = capText(text, cap);
  if (!capped.truncated) return text;
  // Named by call id, not entry id: a fork copies entries under new ids, and must see this same text.
  return `${capped.text}\n[output shortened for the context; the session's record keeps the whole output: call ${r.toolCallId}]`;
}
