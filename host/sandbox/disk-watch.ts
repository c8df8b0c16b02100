import type { Logger } from 'pino';
import type { DiskGuard } from './disk-guard';
import type { RunningExec } from './exec-run';

/**
 * While commands run on a lease, measures the writable layer every interval and kills every running
 * command's tree once it is over the limit. Idle leases cost nothing: the timer runs only while at
 * least one command does, and it is unref'd.
 */
export class DiskWatch {
  private readonly active = new Set<RunningExec>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly disk: DiskGuard,
    private readonly logger: Logger,
  ) {}

  /** Registers a running command; returns the function that unregisters it. */
  track(run: RunningExec): () => void {
    this.active.add(run);
    this.schedule();
    return () => {
      this.active.delete(run);
    };
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.timer || this.active.size === 0 || this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.disk.nextIntervalMs());
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      if (this.active.size === 0) return;
      // Only a walk that began after every judged command started may kill it: one begun earlier
      // (the check after the previous command, slow on a loaded engine) measured the layer before
      // this command ran, and killed the `rm` that was freeing the space.
      const since = Math.max(...[...this.active].map((r) => r.startedAt));
      const used = await this.disk.measure(since);
      if (used > this.disk.limitBytes) {
        // A command that started in an already full layer is judged by what it added: killing the
        // `rm` that frees it (its deletions not yet walked) would leave the layer full for good.
        const judged = [...this.active].filter((run) => run.startedAt <= since && used > run.diskAtStart);
        if (judged.length) this.logger.warn({ usedBytes: used, limitBytes: this.disk.limitBytes }, 'disk limit exceeded; killing running commands');
        for (const run of judged) run.kill('disk');
      }
    } catch (err) {
      this.logger.warn({ err }, 'disk measurement failed');
    } finally {
      this.timer = undefined;
      this.schedule();
    }
  }
}
