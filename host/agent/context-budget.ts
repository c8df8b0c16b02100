import type { Entry } from '../model';
import { recordedCut, type Cut } from './context';
import { ENTRY, type CompactionEntry } from './entries';
import type { ChatRequest } from './model';

/** What the planner needs besides the entries: the window and how to build a request for a cut. */
export interface BudgetOptions {
  contextTokens: number;
  /** Tokens kept free for the answer (`model.maxTokens`, else `compaction.replyTokens`). */
  replyTokens: number;
  bytesPerToken: number;
  targetShare: number;
  turn: number;
  /** The request that would be sent with this cut (the newest compaction entry's when none is given). */
  request(cut?: Cut): Pick<ChatRequest, 'messages' | 'tools'>;
}

export type BudgetPlan =
  | { kind: 'fits'; estimated: number; budget: number }
  /** Record this entry, then build the context again: it fits. */
  | { kind: 'compact'; entry: CompactionEntry }
  /** Even the shortest context the rule allows is over the budget. */
  | { kind: 'too_large'; estimated: number; budget: number; contextTokens: number };

/** Tokens of a request as estimated: the UTF-8 size of its messages and tools as JSON over `bytesPerToken`, rounded up. */
export function estimateTokens(req: Pick<ChatRequest, 'messages' | 'tools'>, bytesPerToken: number): number {
  return Math.ceil(Buffer.byteLength(JSON.stringify({ messages: req.messages, tools: req.tools })) / bytesPerToken);
}

/**
 * Keeps a request within the window by a recorded, deterministic rule (`stub-then-drop/1`).
 *
 * The context as the newest compaction entry cuts it is sent when its estimate is within the
 * budget (window minus the reply's tokens). Otherwise a new cut is chosen, from a list of cuts
 * ordered from mildest to harshest: first the tool results of the oldest turns become stubs, one
 * turn more at each step, then the oldest turns are left out, one more at each step. The first
 * cut (never milder than the one recorded, so the prompt's prefix only changes at a compaction)
 * whose estimate is within `targetShare` of the budget is taken, else the harshest if it is within
 * the budget. The newest model turn is never stubbed or left out while it belongs to the current
 * request (no user message after it): the unfinished turn reads its calls' results. Nor are the
 * session's first and newest user messages or the system prompt.
 *
 * The planner reads entries only, so a resumed host or a fork (which copies entries in order)
 * recomputes the same cut, and a recorded cut is applied by {@link buildContext} alone.
 */
export function planContext(entries: Entry[], o: BudgetOptions): BudgetPlan {
  const budget = o.contextTokens - o.replyTokens;
  const estimate = (cut?: Cut) => estimateTokens(o.request(cut), o.bytesPerToken);
  const current = estimate();
  if (current <= budget) return { kind: 'fits', estimated: current, budget };
  let models = 0;
  let newestModelSeq = -1;
  let newestUserSeq = -1;
  for (const e of entries) {
    if (e.kind === ENTRY.model) (models += 1, (newestModelSeq = e.seq));
    if (e.kind === ENTRY.user) newestUserSeq = e.seq;
  }
  // Turns the rule may touch: all but the newest when the current request still depends on it.
  const p = newestModelSeq > newestUserSeq ? models - 1 : models;
  const cutAt = (level: number): Cut => ({ stubbedTurns: Math.min(level, p), droppedTurns: Math.max(0, level - p) });
  const prev = recordedCut(entries);
  const lo0 = Math.min(2 * p, prev.droppedTurns > 0 ? p + prev.droppedTurns : Math.max(prev.stubbedTurns, 0));
  const hardest = estimate(cutAt(2 * p));
  if (hardest > budget) return { kind: 'too_large', estimated: hardest, budget, contextTokens: o.contextTokens };
  const target = Math.floor(budget * o.targetShare);
  let level = 2 * p;
  if (hardest <= target) {
    // The smallest level within the target; a cut that fits is always found, since the harshest does.
    let lo = lo0;
    let hi = 2 * p;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (estimate(cutAt(mid)) <= target) hi = mid;
      else lo = mid + 1;
    }
    level = hi;
  }
  const cut = cutAt(level);
  return {
    kind: 'compact',
    entry: { rule: 'stub-then-drop/1', turn: o.turn, ...cut, contextTokens: o.contextTokens, budgetTokens: budget, estimatedBefore: current, estimatedAfter: estimate(cut), bytesPerToken: o.bytesPerToken },
  };
}
