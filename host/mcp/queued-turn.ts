import type { KeyedLock } from '../agent/session-lock';
import { BerthError } from '../errors';

/** The code of a call cancelled before it was submitted (nothing of it ran); client-cancel.ts words its answer by it. */
export const CALL_CANCELLED = 'call_cancelled';

/** A call its client cancelled before it was submitted: nothing ran. */
export const cancelledBeforeSubmit = (): BerthError => new BerthError(CALL_CANCELLED, 'the client cancelled this call before it was submitted; nothing ran');

/** What a call waits with for its turn: the request's signal and the client's own cancel (call-outcome.ts `CallOptions`). */
export interface TurnSignals {
  /** Aborts when the request ends unanswered: a cancel, the client's own timeout, its connection gone. */
  signal?: AbortSignal;
  /** Aborts only for the client's own cancel (client-cancel.ts `cancelledByClient`), one turn after `signal`. */
  cancel?: AbortSignal;
}

/**
 * Runs `fn` in the session's turn (calls of a session take turns in its sandbox). A call queued
 * behind a long one (an `exec` of a build) waited out the whole of that call before anything about
 * its request was looked at: over HTTP its POST stayed open all that time, answered only once the
 * call ahead ended. Now, while it waits:
 * - its client's cancel refuses it at once (`call_cancelled`, nothing ran), and its place in the
 *   queue, when reached, runs nothing and passes the turn on;
 * - a request that ends otherwise (the client's own request timeout, -32001, or its connection
 *   gone) is let go at once, but its call still runs in its turn, as a call already running runs
 *   on: a repeat of its call_id gets its outcome.
 * Once `fn` has started, either is `fn`'s own to carry out (a cancel stops the call's run).
 */
export function inTurn<T>(lock: KeyedLock, key: string, o: TurnSignals, fn: () => Promise<T>): Promise<T> {
  const { signal, cancel } = o;
  if (!signal && !cancel) return lock.run(key, fn);
  let started = false;
  const turn = lock.run(key, () => {
    if (cancel?.aborted) throw cancelledBeforeSubmit();
    started = true;
    return fn();
  });
  return new Promise<T>((resolve, reject) => {
    const cancelled = () => {
      if (!started) reject(cancelledBeforeSubmit());
    };
    // The request's end is told from a cancel one turn later, after cancelledByClient (whose
    // listener on the same signal came first) has decided: a cancel decided later still runs
    // nothing, by the check at the turn's start.
    const ended = () =>
      setImmediate(() => {
        if (started) return;
        reject(cancel?.aborted ? cancelledBeforeSubmit() : new BerthError('call_not_awaited', 'the request ended before this call had its turn; the call runs in its turn, and a repeat of its call_id gets its outcome'));
      });
    cancel?.addEventListener('abort', cancelled, { once: true });
    signal?.addEventListener('abort', ended, { once: true });
    if (cancel?.aborted) cancelled();
    else if (signal?.aborted) ended();
    // Settled either way (a reject after the early one is a no-op), so the turn's own refusal is never unhandled.
    turn.then(resolve, reject).finally(() => {
      cancel?.removeEventListener('abort', cancelled);
      signal?.removeEventListener('abort', ended);
    });
  });
}
