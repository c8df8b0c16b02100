import type { LoggedCommit, Store } from '../store';

/** Recent commits kept for the streams (a stream further behind reads the store itself). */
const RECENT = 2000;

/**
 * One short poll of the store's commit log shared by every open event stream: each tick reads the
 * commits after the newest one seen (one indexed range read, usually empty) and keeps the recent
 * ones, so 50 streams cost one read per tick, not 50. (A PostgreSQL store can replace the tick
 * with LISTEN/NOTIFY by calling `wake()`.)
 */
export class CommitFeed {
  /** The newest commit sequence seen; every commit in (base, last] is in `recent`. */
  private last = -1;
  private base = 0;
  private recent: LoggedCommit[] = [];
  private readonly waiters = new Set<() => void>();
  /** The newest live-output sequence seen (host/output): output is not a commit, but it is announced here too. */
  private outputLast = -1;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;

  constructor(private readonly store: Store, private readonly pollMs = 25) {}

  /**
   * The commits after `after` (of one session, when given) the feed holds, and up to which
   * sequence that answer is complete; null when `after` is older than what the feed holds.
   */
  async since(after: number, sessionId?: string): Promise<{ commits: LoggedCommit[]; covered: number } | null> {
    if (this.last < 0) await this.wake();
    if (after < this.base) return null;
    // Binary search for the first commit after `after`: the recent commits are in sequence order.
    let lo = 0;
    let hi = this.recent.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.recent[mid]!.seq <= after) lo = mid + 1;
      else hi = mid;
    }
    const tail = this.recent.slice(lo);
    const commits = sessionId ? tail.filter((c) => c.sessionId === sessionId) : tail;
    return { commits, covered: Math.max(after, this.last) };
  }

  /** The newest sequence the feed has seen. */
  get newest(): number {
    return Math.max(this.last, 0);
  }

  /** The newest live-output sequence the feed has seen. */
  get newestOutput(): number {
    return Math.max(this.outputLast, 0);
  }

  /** Resolves true when live output after `after` is seen; false when the signal aborts or `maxMs` passes. */
  waitOutputBeyond(after: number, signal: AbortSignal, maxMs: number): Promise<boolean> {
    return this.waitFor(() => this.outputLast > after, signal, maxMs);
  }

  /** Resolves true when a commit after `after` or live output after `afterOutput` is seen; false when the signal aborts or `maxMs` passes. */
  waitEitherBeyond(after: number, afterOutput: number, signal: AbortSignal, maxMs: number): Promise<boolean> {
    return this.waitFor(() => this.last > after || this.outputLast > afterOutput, signal, maxMs);
  }

  /** Resolves true when a commit after `after` is seen; false when the signal aborts or `maxMs` passes. */
  waitBeyond(after: number, signal: AbortSignal, maxMs: number): Promise<boolean> {
    return this.waitFor(() => this.last > after, signal, maxMs);
  }

  private async waitFor(moved: () => boolean, signal: AbortSignal, maxMs: number): Promise<boolean> {
    if (moved()) return true;
    if (signal.aborted) return false;
    return new Promise<boolean>((resolve) => {
      const done = (moved: boolean) => {
        clearTimeout(t);
        signal.removeEventListener('abort', stop);
        this.waiters.delete(check);
        this.idle();
        resolve(moved);
      };
      const stop = () => done(false);
      const check = () => {
        if (moved()) done(true);
      };
      const t = setTimeout(stop, maxMs);
      signal.addEventListener('abort', stop, { once: true });
      this.waiters.add(check);
      this.start();
    });
  }

  /** Reads the commits after the newest seen and wakes the streams behind them. */
  wake(): Promise<void> {
    this.polling ??= this.read().finally(() => (this.polling = undefined));
    return this.polling;
  }

  private async read(): Promise<void> {
    try {
      if (this.last < 0) {
        this.last = this.base = await this.store.lastCommitLogSeq();
      } else {
        const fresh = await this.store.listCommitLog({ afterSeq: this.last, limit: RECENT });
        if (fresh.length) {
          this.recent.push(...fresh);
          this.last = fresh[fresh.length - 1]!.seq;
          if (this.recent.length > RECENT) {
            const dropped = this.recent.splice(0, this.recent.length - RECENT);
            this.base = dropped[dropped.length - 1]!.seq;
          }
          // A burst larger than the buffer: the streams behind it read the store themselves.
          if (fresh.length === RECENT) this.base = fresh[0]!.seq - 1 > this.base ? fresh[0]!.seq - 1 : this.base;
        }
      }
      // Only the newest number: each output stream reads its own run's chunks when it moves.
      if (this.waiters.size > 0 || this.outputLast < 0) this.outputLast = await this.store.lastOutputSeq();
    } catch {
      // A closed or busy store: the next tick tries again; streams keep their place.
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
