import { BerthError } from '../errors';
import type { Kernel } from '../kernel';

/** Exit codes of `berth`, documented in the usage text and the README. */
export const EXIT = {
  ok: 0,
  /** The run failed, was cancelled or compensated, or the command hit an error. */
  failed: 1,
  usage: 2,
  needsReconciliation: 3,
  /** Another host took this store's execution right; this one stopped without deciding anything. */
  rightLost: 4,
  /** Stopped by Ctrl-C or SIGTERM; `berth resume RUN` continues. */
  signal: 130,
} as const;

/**
 * Resolves with `work`, or rejects with `execution_right_lost` as soon as the kernel learns that
 * another host took the store's execution right (a refused commit or heartbeat). Without this race
 * a host that lost the right would wait forever for a run it no longer drives.
 */
export async function whileHoldingRight<T>(kernel: Kernel, runId: string, work: Promise<T>, sessionId?: string): Promise<T> {
  let off = () => {};
  let offSession = () => {};
  const lost = new Promise<never>((_, reject) => {
    // A kernel owning sessions one by one loses this run alone when another host claims its session.
    offSession = kernel.onSessionLost((l) => {
      if (l.sessionId !== sessionId) return;
      reject(
        new BerthError(
          'execution_right_lost',
          `another berth process (host ${l.holder ?? '?'}${l.pid ? `, pid ${l.pid}` : ''}) took run ${runId} over (epoch ${l.epoch} is no longer current); this one stopped all work on it and commits nothing more for it`,
          { ids: { runId, sessionId }, details: { ...l } },
        ),
      );
    });
    off = kernel.onLost((l) =>
      reject(
        new BerthError(
          'execution_right_lost',
          `another berth process (host ${l.holder ?? '?'}${l.pid ? `, pid ${l.pid}` : ''}) took this store's execution right; this one stopped without deciding anything. ` +
            `It drives run ${runId} now; if it is gone, continue with: berth resume ${runId}`,
          { ids: { runId }, details: { ...l } },
        ),
      ),
    );
  });
  try {
    return await Promise.race([work, lost]);
  } finally {
    off();
    offSession();
  }
}
