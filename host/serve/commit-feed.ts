import type { Store } from '../store';

/**
 * One short poll of the store's newest commit sequence shared by every open event stream: 50
 * streams cost one indexed read per tick, not 50. Each stream then reads its own commits after the
 * last id it sent. (A PostgreSQL store can replace the tick with LISTEN/NOTIFY: call `wake()`.)
 */
export class CommitFeed {
  private last = 0;
  private readonly waiters = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(private readonly store: Store, private readonly pollMs = 25) {}

  /** Resolves when the store's newest sequence passes `after`, or the signal aborts, or `maxMs` passes. */
  async waitBeyond(after: number, signal: AbortSignal, maxMs: number): Promise<void> {
    if (this.last > after || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        this.waiters.delete(check);
        this.idle();
        resolve();
      };
      const check = () => {
        if (this.last > after) done();
      };
      const t = setTimeout(done, maxMs);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(check);
      this.start();
    });
  }

  /** Reads the newest sequence now and wakes the streams behind it. */
  async wake(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      this.last = Math.max(this.last, await this.store.lastCommitLogSeq());
    } catch {
      // A closed or busy store: the next tick tries again; streams keep their place.
    } finally {
      this.polling = false;
    }
    for (const w of [...this.waiters]) w();
  }

  private start(): void {
    this.timer ??= setInterval(() => void this.wake(), this.pollMs);
  }

  private idle(): void {
    if (this.waiters.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Stops polling (server shutdown). */
  close(): void {
    for (const w of [...this.waiters]) w();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
