import { BerthError } from '../errors';
import type { Kernel } from '../kernel';

/** Exit codes of `berth`, documented in the usage text and the README. */
export const EXIT = {
  ok: 0,
  /** The run failed, was cancelled or compensated, or the command hit an error. */
  failed: 1,
  usage: 2,
  needsReconciliation: 3,
  /** Another host took this run over (or this host's lease on it ran out); this one stopped all work on it. */
  rightLost: 4,
  /** Stopped by Ctrl-C or SIGTERM; `berth resume RUN` continues. */
  signal: 130,
} as const;

/**
 * Resolves with `work`, or rejects with `execution_right_lost` as soon as the kernel loses the
 * run's session (another host claimed it, or this host's lease ran out before a renewal reached
 * the store). Without this race a host that lost the run would wait forever for it.
 */
export async function whileHoldingRight<T>(kernel: Kernel, runId: string, work: Promise<T>, sessionId?: string): Promise<T> {
  let off = () => {};
  const lost = new Promise<never>((_, reject) => {
    off = kernel.onSessionLost((l) => {
      if (l.sessionId !== sessionId) return;
      const by = `host ${l.holder ?? '?'}${l.pid ? `, pid ${l.pid}` : ''}`;
      const what =
        l.why === 'expired'
          ? `this host's lease on run ${runId} ran out before a renewal reached the store (the process was paused or the store did not answer); it stopped all work on it and commits nothing more for it. Continue with: berth resume ${runId}`
          : `another berth process (${by}) took run ${runId} over (epoch ${l.epoch} is no longer current); this one stopped all work on it and commits nothing more for it. If that host is gone, continue with: berth resume ${runId}`;
      reject(new BerthError('execution_right_lost', what, { ids: { runId, sessionId }, details: { ...l } }));
    });
  });
  try {
    return await Promise.race([work, lost]);
  } finally {
    off();
  }
}
