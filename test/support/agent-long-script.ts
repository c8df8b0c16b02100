import { turnFromCallIds, type RecordedRequest, type ScriptedTurn } from './model-server';

export const WINDOW = 4_096;
export const TURNS = 120;
/** About 1.5 KB of output per read: twelve turns of it fill the window. */
export const BIG = Array.from({ length: 60 }, (_, i) => `line ${String(i).padStart(3, '0')}: the quick brown fox jumps`).join('\n');

/**
 * The long session's model (`turns` read turns, default TURNS). Turn 0 writes big.txt, turns 1..TURNS read it back, then the answer; after a new user message, one read and an answer. */
export function longScript(_turn: number, body: RecordedRequest['body'], turns = TURNS): ScriptedTurn {
  const last = body.messages.at(-1)!;
  const turn = turnFromCallIds(body);
  if (last.role === 'user' && body.messages.filter((m) => m.role === 'user').length > 1) return { toolCalls: [{ name: 'read_file', arguments: { path: 'big.txt' }, id: `call_${turn}_0` }] };
  if (turn === 0) return { toolCalls: [{ name: 'write_file', arguments: { path: 'big.txt', content: BIG } }] };
  if (last.role === 'tool' && body.messages.filter((m) => m.role === 'user').length > 1) return { content: `read it again at turn ${turn}` };
  if (turn <= turns) return { toolCalls: [{ name: 'read_file', arguments: { path: 'big.txt' }, id: `call_${turn}_0` }] };
  return { content: `read big.txt ${turns} times` };
}

