/** How many characters of command output may wait for a slow terminal before lines are skipped. */
export const BACKLOG_CHARS = 4 << 20;

/** A stream that says how much of what was written to it still waits (every Node writable does). */
export type Backlogged = { write(s: string): unknown; readonly writableLength: number };

/**
 * Writes command output to a terminal without queueing more than `maxChars`: a write to a pipe
 * the reader does not empty is queued in this process, so a stalled terminal (a paused `less`, a
 * slow ssh) made a step printing 48 MiB hold all of it. While the backlog is over the bound,
 * output lines are counted instead of written; the next write says how many were skipped.
 * Berth's own lines ({@link TerminalOutput.own}) are always written.
 */
export class TerminalOutput {
  private skipped = 0;

  constructor(
    private readonly out: Backlogged,
    private readonly maxChars = BACKLOG_CHARS,
  ) {}

  /** Lines a command printed: written in one write, or skipped and counted while the terminal is behind. */
  output(lines: readonly string[]): void {
    if (lines.length === 0) return;
    if (this.out.writableLength > this.maxChars) {
      this.skipped += lines.length;
      return;
    }
    this.out.write(`${[...this.notice(), ...lines].join('\n')}\n`);
  }

  /** One of Berth's own lines, after the count of any skipped output. */
  own(line: string): void {
    this.out.write(`${[...this.notice(), line].join('\n')}\n`);
  }

  private notice(): string[] {
    if (this.skipped === 0) return [];
    const n = this.skipped;
    this.skipped = 0;
    return [`  … ${n} output line(s) not shown: the terminal fell behind (\`berth logs RUN\` keeps the tail)`];
  }
}
