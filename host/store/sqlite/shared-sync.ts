import { closeSync, existsSync, fsync, fsyncSync, openSync } from 'node:fs';

/**
 * Group commit by shared flush: each commit is applied (written to the WAL, visible to every
 * reader) inside its own call, without a flush of its own; its caller is answered only once a flush
 * that began after the write has completed. Every commit applied while one flush runs waits for the
 * next, so N commits asked for together cost one flush. While flushes are fast the flush runs on
 * this thread (a ~0.2 ms fsync); once they are slow it runs on libuv's thread pool, so a slow disk
 * never holds the event loop for long twice in a row.
 *
 * Why the write is not deferred with the flush (a queue applied on a later turn): code that reads
 * the store between a commit's call and its answer must see it, as it always had. A run whose two
 * tasks both asked for `retry_wait` in one turn read the run as `running` twice, and the second
 * decision was refused with its "not sent" effect write in it; the email's retry then took its
 * refused connection for one that might have arrived (host/store README, "Group commit").
 *
 * Durability is unchanged: the caller, which acts on the outside world only after its answer, is
 * answered after its WAL frames are on disk. A reader that sees a commit before its flush sees a
 * write a process crash keeps (the frames are in the OS's cache) and only a machine crash could
 * drop, together with everything written after it (WAL frames are synced in order).
 */
export class SharedSync {
  private waiting: Array<{ resolve(): void; reject(err: unknown): void }> = [];
  private flushing = false;
  /** Flushes done; a test reads it to see commits share them. */
  flushes = 0;
  /** Flushes done on the event loop's own thread (`flushNow`); a test reads it. */
  inline = 0;
  /** Recent flush time, ms (a moving average). */
  private recentMs = 0;

  /**
   * @param flushNow the same flush on this thread. Used while flushes are fast (recently under
   *   {@link INLINE_BELOW_MS}): handing a ~0.2 ms fsync to the thread pool and back cost ~0.1 ms more
   *   than the fsync, a fifth of a lone run's step. A slow disk moves the average up and flushes go
   *   back to the pool, so the event loop is never held for long twice in a row.
   */
  constructor(
    private readonly flush: () => Promise<void>,
    private readonly flushNow?: () => void,
  ) {}

  /** Resolves once a flush that began after this call has completed (rejects if that flush failed). */
  after(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.flushing) this.start();
    });
  }

  /** Resolves once no flush is running (a store closes after its last flush, never under one). */
  async idle(): Promise<void> {
    while (this.flushing) await this.after().catch(() => {});
  }

  private start(): void {
    this.flushing = true;
    // Commits asked for in the same turn as this one are applied before the flush begins: wait
    // for the turn to end (setImmediate) so they share it.
    setImmediate(() => {
      const group = this.waiting;
      this.waiting = [];
      const t0 = performance.now();
      const settle = (err?: unknown) => {
        this.recentMs = 0.8 * this.recentMs + 0.2 * (performance.now() - t0);
        if (err === undefined) {
          this.flushes++;
          for (const w of group) w.resolve();
        } else for (const w of group) w.reject(err);
        this.flushing = false;
        if (this.waiting.length > 0) this.start();
      };
      if (this.flushNow && this.recentMs < INLINE_BELOW_MS) {
        let failed: { err: unknown } | undefined;
        try {
          this.flushNow();
          this.inline++;
        } catch (err) {
          failed = { err };
        }
        return settle(failed ? (failed.err ?? new Error('flush failed')) : undefined);
      }
      this.flush().then(
        () => settle(),
        (err: unknown) => settle(err ?? new Error('flush failed')),
      );
    });
  }
}

/** Flushes are done on the event loop's thread while they recently took less than this (ms). */
export const INLINE_BELOW_MS = 1;

/**
 * fsync of a store's WAL file, on the thread pool. The file descriptor is opened at the first
 * flush (the WAL exists once the first write went through it) and kept: the WAL file lives as long
 * as a connection to the database is open, and this store's is.
 */
export function walFlush(dbPath: string): { flush: () => Promise<void>; flushNow: () => void; close(): void } {
  let fd: number | null = null;
  // No WAL file: nothing was written through one, so nothing waits for a flush.
  const open = (): number | null => {
    if (fd === null) {
      const wal = `${dbPath}-wal`;
      if (!existsSync(wal)) return null;
      fd = openSync(wal, 'r');
    }
    return fd;
  };
  return {
    flush: () =>
      new Promise<void>((resolve, reject) => {
        const f = open();
        if (f === null) return resolve();
        fsync(f, (err) => (err ? reject(err) : resolve()));
      }),
    flushNow: () => {
      const f = open();
      if (f !== null) fsyncSync(f);
    },
    close() {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}
