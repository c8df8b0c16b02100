import type { Logger } from 'pino';
import { isFinalRunState, type Run, type RunState } from '../model';
import type { Store } from '../store';

/** What {@link waitForRun} reads: the store, a log for refused reads, and the kernel's commit announcements. */
export interface RunWaitDeps {
  store: Store;
  logger: Logger;
  /** Subscribes to the run ids each commit touched; returns the unsubscribe. */
  onCommit(listener: (e: { runIds: string[] }) => void): () => void;
}

/**
 * Resolves when the run reaches one of `states` (default: a final state or needs_reconciliation).
 * Checked at every commit of this host that touches the run, and every 250 ms for the commits
 * of other processes.
 */
export function waitForRun(d: RunWaitDeps, runId: string, opts: { signal?: AbortSignal; states?: RunState[] } = {}): Promise<Run> {
  const done = (r: Run | undefined) =>
    r && (opts.states ? opts.states.includes(r.state) : isFinalRunState(r.state) || r.state === 'needs_reconciliation');
  return new Promise((resolve, reject) => {
    // An abort listener added to an already aborted signal never runs: the wait would poll forever.
    if (opts.signal?.aborted) return reject(opts.signal.reason);
    let checking = false;
    const check = async () => {
      if (checking) return;
      checking = true;
      let run: Run | undefined;
      try {
        run = await d.store.getRun(runId);
      } catch (err) {
        // A read refused by a busy store is asked again at the next tick; left unhandled it would
        // end the process (exit 1) while the run is fine, and a stuck flag would stop every check.
        d.logger.warn({ err, runId }, 'could not read the run; trying again');
        return;
      } finally {
        checking = false;
      }
      if (done(run)) {
        off();
        clearInterval(iv);
        resolve(run!);
      }
    };
    const off = d.onCommit((e) => void (e.runIds.includes(runId) && check()));
    const iv = setInterval(() => void check(), 250);
    opts.signal?.addEventListener('abort', () => (off(), clearInterval(iv), reject(opts.signal!.reason)), { once: true });
    void check();
  });
}
