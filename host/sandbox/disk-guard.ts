import type Dockerode from 'dockerode';

/** Options of the disk limit mechanism; see README.md "Disk". */
export interface DiskGuardOptions {
  /**
   * The fastest rate at which a command is assumed to grow the writable layer. It decides when an
   * exec that just ended could have crossed the limit and so must be measured. Default 4 GiB/s,
   * above page-cache write speed on the machines measured.
   */
  assumedWriteBytesPerS?: number;
  /** Shortest interval between measurements while execs run. Default 1000 ms. */
  minIntervalMs?: number;
}

/**
 * Bounds the container's writable layer (`SizeRw`, what the engine reports for the upper layer).
 * overlay2 on ext4 has no quota, so the limit is enforced by measuring: periodically while execs
 * run, and after an exec whenever the layer could have crossed the limit since the last
 * measurement. Measuring costs one `inspect?size=1`, which walks the upper layer in the daemon;
 * the interval stretches to ten times the last measurement so the walk never takes more than ~10%
 * of a core.
 */
export class DiskGuard {
  readonly limitBytes: number;
  private readonly rate: number;
  private readonly minIntervalMs: number;
  private measuredBytes = 0;
  /** Bytes that may have been added since the last measurement (known writes plus assumed rate). */
  private unmeasuredBytes = 0;
  private lastCostMs = 0;
  private measureStartedAt = -Infinity;
  private inflight: Promise<number> | undefined;
  /** The walk of `inflight` starts no earlier than this. */
  private inflightSince = -Infinity;

  constructor(
    private readonly container: Dockerode.Container,
    diskMb: number,
    opts: DiskGuardOptions = {},
  ) {
    this.limitBytes = Math.round(diskMb * 1024 * 1024);
    this.rate = opts.assumedWriteBytesPerS ?? 4 * 1024 ** 3;
    this.minIntervalMs = opts.minIntervalMs ?? 1000;
  }

  /** The last measured size plus what may have been written since. */
  get upperBoundBytes(): number {
    return this.measuredBytes + this.unmeasuredBytes;
  }

  get lastMeasuredBytes(): number {
    return this.measuredBytes;
  }

  /** Records a write of known size (an upload). */
  noteBytes(bytes: number): void {
    this.unmeasuredBytes += bytes;
  }

  /**
   * Records that a command ran between two `performance.now()` instants; it may have written at the
   * assumed rate for the part not covered by a later measurement.
   */
  noteRunTime(startedAt: number, endedAt: number): void {
    const from = Math.max(startedAt, this.measureStartedAt);
    if (endedAt > from) this.unmeasuredBytes += (this.rate * (endedAt - from)) / 1000;
  }

  /** True when the layer could be over the limit, so only a measurement can tell. */
  mayExceed(extraBytes = 0): boolean {
    return this.upperBoundBytes + extraBytes > this.limitBytes;
  }

  /** The interval for the next measurement while execs run. */
  nextIntervalMs(): number {
    return Math.max(this.minIntervalMs, this.lastCostMs * 10);
  }

  /**
   * Measures the layer; concurrent callers share one engine call. `freshAfter` (a
   * `performance.now()` instant) refuses a measurement that began earlier: the check after a
   * command must not take a walk that started while the command was still writing or deleting.
   */
  measure(freshAfter = -Infinity): Promise<number> {
    if (this.inflight && this.inflightSince >= freshAfter) return this.inflight;
    const previous = this.inflight ?? Promise.resolve(0);
    const next = previous.catch(() => 0).then(() => this.doMeasure());
    this.inflight = next;
    this.inflightSince = performance.now();
    void next.then(
      () => this.settled(next),
      () => this.settled(next),
    );
    return next;
  }

  private settled(p: Promise<number>): void {
    if (this.inflight === p) this.inflight = undefined;
  }

  private async doMeasure(): Promise<number> {
    const started = performance.now();
    this.measureStartedAt = started;
    // Writes that land while the daemon walks the layer may or may not be counted; keep what was
    // noted before the call until the new figure is in, so the bound never drops below the truth.
    const noted = this.unmeasuredBytes;
    const info = (await this.container.inspect({ size: true } as Dockerode.ContainerInspectOptions)) as { SizeRw?: number };
    this.lastCostMs = performance.now() - started;
    this.measuredBytes = info.SizeRw ?? 0;
    this.unmeasuredBytes = Math.max(0, this.unmeasuredBytes - noted);
    return this.measuredBytes;
  }

  /** True when the last measurement was over the limit. */
  get exceeded(): boolean {
    return this.measuredBytes > this.limitBytes;
  }
}
