import type Dockerode from 'dockerode';
import { setTimeout as sleep } from 'node:timers/promises';

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
 * Runs `fn`; while the engine refuses it because the container is paused, waits until the
 * container is no longer paused (by inspecting it) and runs it again. Gives up with the engine's
 * refusal after `maxMs`, or when the signal aborts.
 */
export async function unlessPaused<T>(container: Dockerode.Container, fn: () => Promise<T>, opts: { signal?: AbortSignal; maxMs?: number } = {}): Promise<T> {
  const until = Date.now() + (opts.maxMs ?? PAUSE_WAIT_MS);
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!isPausedRefusal(err) || Date.now() > until || opts.signal?.aborted) throw err;
      for (let delay = 25; Date.now() <= until && !opts.signal?.aborted; delay = Math.min(delay * 2, 500)) {
        const state = await container.inspect().then((i) => i.State, () => undefined);
        if (!state?.Paused) break;
        await sleep(delay);
      }
    }
  }
}
