/** How long a line the operator was shown stays "just shown". */
export const REPEAT_WINDOW_MS = 30_000;
/** Lines remembered at most (the oldest are forgotten first). */
const REMEMBERED = 256;

/**
 * Collapses a log line the operator was just shown. An outage (a PostgreSQL store restarting, an
 * engine that does not answer) makes every poller of a host say the same sentence several times a
 * second: a 5 s store restart under `berth run` printed 35 warning lines, 20 of them the same. The
 * first line of a kind is printed; the same line again within {@link REPEAT_WINDOW_MS} is only
 * counted; after the window it is printed again saying how many were left out, and {@link flush}
 * (at exit) says it for those still counted, so nothing is hidden, only folded.
 */
export class RepeatCollapser {
  private readonly seen = new Map<string, { at: number; left: number }>();

  constructor(
    private readonly write: (text: string) => void,
    private readonly now: () => number = Date.now,
    private readonly windowMs = REPEAT_WINDOW_MS,
  ) {}

  /** Prints `text` (one line, ending in a newline) unless the same line was printed within the window. */
  line(text: string): void {
    const at = this.now();
    const s = this.seen.get(text);
    if (s && at - s.at < this.windowMs) {
      s.left += 1;
      return;
    }
    this.seen.delete(text);
    this.seen.set(text, { at, left: 0 });
    if (this.seen.size > REMEMBERED) this.forgetOldest();
    this.write(s?.left ? withCount(text, s.left, at - s.at) : text);
  }

  /** Says, once, how often each folded line came since it was last printed. */
  flush(): void {
    const at = this.now();
    for (const [text, s] of this.seen) {
      if (s.left === 0) continue;
      this.write(withCount(text, s.left, at - s.at));
      s.left = 0;
    }
  }

  private forgetOldest(): void {
    for (const [text, s] of this.seen) {
      // A line whose repeats were not said yet is said before it is forgotten.
      if (s.left) this.write(withCount(text, s.left, this.now() - s.at));
      this.seen.delete(text);
      return;
    }
  }
}

function withCount(text: string, left: number, ms: number): string {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  return `${body} [${left} more time${left === 1 ? '' : 's'} in the last ${Math.max(1, Math.round(ms / 1000))} s]\n`;
}
