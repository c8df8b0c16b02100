import type { HostRuntime } from '../runtime/host-runtime';
import { drive } from './drive';
import type { RuntimeParts } from './runtime';

/**
 * Runs a long-lived host (`berth serve`) drives in the background: a reconcile or a fork decided
 * from a request is carried on to its end here, as its owner, after the request has been answered.
 * `close` stops them without deciding anything (each run keeps its state; a resume continues) and
 * waits for their run-end work.
 */
export class BackgroundDrives {
  private readonly stop = new AbortController();
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly p: RuntimeParts) {}

  start(rt: HostRuntime, runId: string): void {
    const p = drive(this.p, rt, runId, this.stop.signal)
      .then((d) => this.p.logger.info({ runId, state: d.run.state, settled: d.settled }, 'background drive ended'))
      .catch((err: unknown) => this.p.logger.warn({ err, runId }, 'background drive stopped; berth resume continues the run'));
    this.running.add(p);
    void p.finally(() => this.running.delete(p));
  }

  async close(): Promise<void> {
    this.stop.abort();
    await Promise.allSettled([...this.running]);
  }
}
