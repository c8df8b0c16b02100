import type { Logger } from 'pino';
import { BerthError, isBerthError } from '../../errors';

/**
 * How long a `sync` push may wait for a registry that does not answer before the step stops
 * waiting inside its phase (and waits in `retry_wait` instead). Long enough for a registry
 * restart; `BERTH_PUSH_WAIT_MS` changes it.
 */
export const DEFAULT_PUSH_WAIT_MS = 90_000;

export function pushWaitMs(): number {
  const env = Number(process.env.BERTH_PUSH_WAIT_MS);
  return Number.isFinite(env) && env >= 0 && process.env.BERTH_PUSH_WAIT_MS !== undefined ? env : DEFAULT_PUSH_WAIT_MS;
}

/** The waits between attempts: 1 s doubling to 10 s; jitter keeps several hosts from knocking at once. */
export function pushBackoffMs(attempt: number): number {
  const base = Math.min(10_000, 1000 * 2 ** attempt);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/** The push did not land within its wait: the image is kept, nothing is lost, the push is owed. */
export class PushWaitSpent extends BerthError {
  constructor(what: string, waitedMs: number, last: BerthError) {
    super('registry_push_waiting', `${what}: the registry did not take it within ${Math.round(waitedMs / 1000)} s (${last.message})`, {
      retryable: true,
      ids: last.ids,
      details: { ...last.details, waitedMs },
      cause: last,
    });
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/**
 * Runs `push` until it lands, waiting with backoff after each retryable failure (an unreachable
 * registry, a push cut off half way: the engine sends again only what the registry lacks) for at
 * most `waitMs` in all; then {@link PushWaitSpent}. A failure that is not retryable, or the
 * caller's abort, ends it at once.
 */
export async function pushWithRetry<T>(what: string, push: () => Promise<T>, o: { logger: Logger; waitMs: number; signal?: AbortSignal; ids?: Record<string, string> }): Promise<T> {
  const start = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await push();
    } catch (err) {
      if (o.signal?.aborted || !isBerthError(err) || !err.retryable) throw err;
      const left = o.waitMs - (Date.now() - start);
      if (left <= 0) throw new PushWaitSpent(what, Date.now() - start, err);
      const wait = Math.min(left, pushBackoffMs(attempt));
      o.logger.warn({ ...o.ids, err: err.message, code: err.code, attempt: attempt + 1, waitMs: wait }, 'snapshot push failed; trying again');
      await sleep(wait, o.signal);
    }
  }
}
