/** The most characters of one output line the terminal is shown; the rest is cut and counted. */
export const LINE_CAP = 4096;

/**
 * Splits streamed text into lines while holding at most `cap` characters of the line in progress:
 * what a line has beyond that is only counted, and the line ends in `… [N characters cut]`. So a
 * command printing one endless line costs the viewer `cap` characters, never the line, and every
 * chunk is looked at once (re-splitting the partial line on each chunk made a 48 MiB line quadratic).
 */
export class LineCap {
  private head = '';
  private cut = 0;

  constructor(private readonly cap = LINE_CAP) {}

  /** The lines that `text` completed, each capped. */
  push(text: string): string[] {
    const lines: string[] = [];
    let from = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', from)) {
      this.take(text, from, nl);
      lines.push(this.finish());
      from = nl + 1;
    }
    this.take(text, from, text.length);
    return lines;
  }

  /** The unfinished last line, capped, or undefined when there is none. */
  end(): string | undefined {
    return this.head === '' && this.cut === 0 ? undefined : this.finish();
  }

  private take(text: string, from: number, to: number): void {
    const room = roomFor(text, from, to, this.cap - this.head.length);
    if (room > 0) this.head += text.slice(from, from + room);
    this.cut += to - from - room;
  }

  private finish(): string {
    const line = this.cut > 0 ? `${this.head}… [${this.cut} characters cut]` : this.head;
    this.head = '';
    this.cut = 0;
    return line;
  }
}

/** How many characters of `text[from, to)` fit in `free`, never ending inside a surrogate pair (the terminal would show a replacement character). */
function roomFor(text: string, from: number, to: number, free: number): number {
  let room = Math.max(0, Math.min(free, to - from));
  if (room > 0 && room < to - from) {
    const c = text.charCodeAt(from + room - 1);
    if (c >= 0xd800 && c <= 0xdbff) room--;
  }
  return room;
}

/** Every line of a whole `text`, each capped as {@link LineCap} caps it (a final newline ends the last line). */
export function capLines(text: string, cap = LINE_CAP): string[] {
  const c = new LineCap(cap);
  const lines = c.push(text);
  const rest = c.end();
  if (rest !== undefined) lines.push(rest);
  return lines;
}

/**
 * The streaming form of {@link LineCap} for text that is written as it arrives (a model's streamed
 * answer): characters pass through until their line holds `cap`, the rest of the line is counted,
 * and the count is written where the line ends (or at {@link LiveLineCap.end}).
 */
export class LiveLineCap {
  private shown = 0;
  private cut = 0;

  constructor(private readonly cap = LINE_CAP) {}

  /** What of `text` to write now. */
  pass(text: string): string {
    let out = '';
    let from = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', from)) {
      out += `${this.keep(text, from, nl)}${this.end()}\n`;
      from = nl + 1;
    }
    return out + this.keep(text, from, text.length);
  }

  /** The count of what the current line lost (empty when nothing), and a fresh line. */
  end(): string {
    const mark = this.cut > 0 ? `… [${this.cut} characters cut]` : '';
    this.shown = 0;
    this.cut = 0;
    return mark;
  }

  private keep(text: string, from: number, to: number): string {
    const room = roomFor(text, from, to, this.cap - this.shown);
    this.shown += room;
    this.cut += to - from - room;
    return text.slice(from, from + room);
  }
}
