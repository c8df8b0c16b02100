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
 * of other processes. Rejects with the reason of the first of `signals` to abort.
 */
export function waitForRun(d: RunWaitDeps, runId: string, opts: { signals?: Array<AbortSignal | undefined>; states?: RunState[] } = {}): Promise<Run> {
  const done = (r: Run | undefined) =>
    r && (opts.states ? opts.states.includes(r.state) : isFinalRunState(r.state) || r.state === 'needs_reconciliation');
  return new Promise((resolve, reject) => {
    const signals = (opts.signals ?? []).filter((s): s is AbortSignal => s !== undefined);
    // An abort listener added to an already aborted signal never runs: the wait would poll forever.
    const early = signals.find((s) => s.aborted);
    if (early) return reject(early.reason);
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
        end();
        resolve(run!);
      }
    };
    // Each listener is taken off when the wait ends, however it ends: the signals outlive it (the
    // kernel's own lives as long as the kernel), and a listener left on one kept each wait's
    // closures for the life of the process, ~8 KB per MCP call (bench/_wait-leak.ts).
    const end = () => {
      off();
      clearInterval(iv);
      for (const s of signals) s.removeEventListener('abort', aborted);
    };
    function aborted(this: AbortSignal) {
      end();
      reject(this.reason);
    }
    const off = d.onCommit((e) => void (e.runIds.includes(runId) && check()));
    const iv = setInterval(() => void check(), 250);
    for (const s of signals) s.addEventListener('abort', aborted, { once: true });
    void check();
  });
}
