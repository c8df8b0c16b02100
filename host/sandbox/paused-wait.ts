import type Dockerode from 'dockerode';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../errors';

/**
 * True when the engine refused an exec because the container is paused. The engine pauses a
 * container for the length of a paused `docker commit` (our snapshots, and the engine's own
 * retake) and unpauses it itself when the commit ends: the sandbox is alive, just frozen for a
 * moment, so a caller must wait rather than conclude it is gone.
 */
export function isPausedRefusal(err: unknown): boolean {
  const cause = (err as { cause?: unknown } | null)?.cause;
  if (cause !== undefined && isPausedRefusal(cause)) return true;
  const e = typeof err === 'object' && err !== null ? (err as { statusCode?: number; message?: string; json?: { message?: string } }) : {};
  return e.statusCode === 409 && /is paused/.test(`${e.message ?? ''} ${e.json?.message ?? ''}`);
}

/** How long a paused sandbox is waited for: longer than any commit of a workspace within the limits. */
export const PAUSE_WAIT_MS = 120_000;

/**
 * Thrown by {@link unlessPaused} when its signal aborts while the container is paused: `fn` never
 * got past the engine's refusal, so nothing was started. Not a broken sandbox (it is alive, only
 * frozen): a caller reports the cancel, and `details.delivery` says the request was not sent.
 */
export class CancelledWhilePaused extends BerthError {
  constructor(reason: unknown) {
    const why = reason instanceof Error ? reason.message : reason === undefined ? 'aborted' : String(reason);
    super('cancelled_while_paused', `cancelled (${why}) while the sandbox was paused; nothing was started`, { details: { delivery: 'not_sent' } });
    this.name = 'CancelledWhilePaused';
  }
}

/**
 * Runs `fn`; while the engine refuses it because the container is paused, waits until the
 * container is no longer paused (by inspecting it) and runs it again. Gives up with the engine's
 * refusal after `maxMs`; throws {@link CancelledWhilePaused} when the signal aborts while the
 * container is paused (`fn` is not tried again then: an unpause at that moment must not start
 * what was just cancelled).
 */
export async function unlessPaused<T>(container: Dockerode.Container, fn: () => Promise<T>, opts: { signal?: AbortSignal; maxMs?: number } = {}): Promise<T> {
  const until = Date.now() + (opts.maxMs ?? PAUSE_WAIT_MS);
  const signal = opts.signal;
  for (let waited = false; ; waited = true) {
    if (waited && signal?.aborted) throw new CancelledWhilePaused(signal.reason);
    try {
      return await fn();
    } catch (err) {
      if (!isPausedRefusal(err)) throw err;
      if (signal?.aborted) throw new CancelledWhilePaused(signal.reason);
      if (Date.now() > until) throw err;
      for (let delay = 25; Date.now() <= until; delay = Math.min(delay * 2, 500)) {
        const state = await container.inspect().then((i) => i.State, () => undefined);
        if (!state?.Paused) break;
        // The sleep ends at the abort: a cancel is answered at once, not after the pause.
        await sleep(delay, undefined, signal ? { signal } : undefined).catch(() => undefined);
        if (signal?.aborted) throw new CancelledWhilePaused(signal.reason);
      }
    }
  }
}
