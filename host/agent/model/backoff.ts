/**
 * Delay before retry number `attempt` (1 = after the first failure): exponential from `baseMs`,
 * capped, with the server's `retryAfterMs` taking precedence when it gave one. Deterministic (no
 * jitter) because the wake time is committed task state and tests compare runs.
 */
export function backoffMs(attempt: number, o: { baseMs: number; maxMs: number; retryAfterMs?: number | null }): number {
  if (o.retryAfterMs != null) return o.retryAfterMs;
  return Math.min(o.maxMs, o.baseMs * 2 ** Math.max(0, attempt - 1));
}
