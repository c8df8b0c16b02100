import type { NewOutputChunk, OutputRecords } from '../store/output';
import { newId } from '../support';

/** Bytes of an attempt's output stored as it comes; past it only a count and the last {@link TAIL_CHARS} per stream. */
export const OUTPUT_CAP_BYTES = 4 << 20;
/** Characters of each stream's end kept after the cap, written when the attempt ends. */
export const TAIL_CHARS = 16_000;
/** The most text one stored chunk holds. */
const CHUNK_CHARS = 32_000;
/**
 * Pending text that is written at once rather than at the next tick: several chunks per write, so
 * a command printing fast costs few transactions (each is a synced write on SQLite).
 */
const FLUSH_CHARS = 512_000;
/** How long printed text waits before it is written: the live delay a reader sees, at most. */
const FLUSH_MS = 40;

export interface OutputWriterOptions {
  runId: string;
  /** `step:<index>` or `tool:<toolCallId>`. */
  source: string;
  label: string;
  now?: () => number;
  capBytes?: number;
  flushMs?: number;
  /** Write the `end` chunk even when nothing was printed (a step: its attempt is listed); default true. */
  endSilent?: boolean;
  /** A write the store refused: the command goes on (its receipt still keeps the tails); said once. */
  onError?: (err: unknown) => void;
}

type Stream = 'stdout' | 'stderr';

/**
 * Writes one attempt's scrubbed output to the store while the command runs: chunks of at most
 * {@link CHUNK_CHARS} every {@link FLUSH_MS} (or at once past {@link FLUSH_CHARS}), one write in flight at a time, so a crash
 * loses at most the last moments and a slow store never holds the command up. Past the cap the
 * writer keeps counting what it cut and the end of each stream, written with the `end` chunk: a
 * huge output costs bounded rows and memory, and the reader still sees how it ended.
 */
export class OutputWriter {
  readonly attempt = newId('out');
  private n = 0;
  private pending: Array<{ channel: Stream | 'end'; text: string; cut: number }> = [];
  private pendingChars = 0;
  private storedBytes = 0;
  private cut = 0;
  /** Each stream's text past the cap, as pieces: joined only at the end (a fast printer pushes many small pieces). */
  private readonly tails: Record<Stream, { parts: string[]; chars: number }> = { stdout: { parts: [], chars: 0 }, stderr: { parts: [], chars: 0 } };
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private failed = false;
  private ended = false;
  private readonly cap: number;
  private readonly now: () => number;

  constructor(private readonly store: OutputRecords, private readonly o: OutputWriterOptions) {
    this.cap = o.capBytes ?? OUTPUT_CAP_BYTES;
    this.now = o.now ?? Date.now;
  }

  /** Bytes left out by the cap so far. */
  get cutBytes(): number {
    return this.cut;
  }

  push(channel: Stream, text: string): void {
    if (!text || this.ended) return;
    if (this.storedBytes < this.cap) {
      const bytes = Buffer.byteLength(text);
      if (this.storedBytes + bytes <= this.cap) {
        this.storedBytes += bytes;
        this.queue(channel, text);
      } else {
        // Cut at a character, not a byte: what is kept stays valid text.
        const room = this.cap - this.storedBytes;
        const kept = Buffer.from(text).subarray(0, room).toString('utf8').replace(/\uFFFD$/, '');
        const keptBytes = Buffer.byteLength(kept);
        this.storedBytes = this.cap;
        if (kept) this.queue(channel, kept);
        this.cut += bytes - keptBytes;
        this.keepTail(channel, text.slice(kept.length));
      }
      return;
    }
    this.cut += Buffer.byteLength(text);
    this.keepTail(channel, text);
  }

  /** Writes what is pending, the tails past the cap and the `end` chunk saying how the attempt ended. */
  async end(how: string): Promise<void> {
    if (this.ended) return this.chain;
    this.ended = true;
    if (this.o.endSilent === false && this.n === 0 && this.pending.length === 0 && this.cut === 0) return this.chain;
    for (const channel of ['stdout', 'stderr'] as const) {
      const t = this.tails[channel].parts.join('');
      if (t) this.pending.push({ channel, text: t.length > TAIL_CHARS ? t.slice(-TAIL_CHARS) : t, cut: this.cut });
    }
    this.pending.push({ channel: 'end', text: how, cut: this.cut });
    this.flush();
    return this.chain;
  }

  private keepTail(channel: Stream, text: string): void {
    const t = this.tails[channel];
    t.parts.push(text);
    t.chars += text.length;
    // Drop whole pieces the end no longer needs; compact now and then so the array stays small.
    let drop = 0;
    while (drop < t.parts.length - 1 && t.chars - t.parts[drop]!.length >= TAIL_CHARS) t.chars -= t.parts[drop++]!.length;
    if (drop) t.parts.splice(0, drop);
  }

  private queue(channel: Stream, text: string): void {
    const last = this.pending[this.pending.length - 1];
    if (last && last.channel === channel && last.cut === this.cut && last.text.length + text.length <= CHUNK_CHARS) last.text += text;
    else this.pending.push({ channel, text, cut: this.cut });
    this.pendingChars += text.length;
    if (this.pendingChars >= FLUSH_CHARS) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.o.flushMs ?? FLUSH_MS);
  }

  /** Writes, spent: what the store's writes of this attempt cost (a synced SQLite write holds this process's only thread). */
  readonly writes = { count: 0, ms: 0, maxMs: 0 };

  private async write(chunks: NewOutputChunk[]): Promise<void> {
    const t0 = performance.now();
    try {
      await this.store.appendOutput(chunks);
    } finally {
      const ms = performance.now() - t0;
      this.writes.count++;
      this.writes.ms += ms;
      this.writes.maxMs = Math.max(this.writes.maxMs, ms);
    }
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return;
    const at = this.now();
    const chunks: NewOutputChunk[] = [];
    for (const p of this.pending) {
      for (let i = 0; i < Math.max(p.text.length, 1); i += CHUNK_CHARS) {
        chunks.push({ runId: this.o.runId, source: this.o.source, label: this.o.label, attempt: this.attempt, n: this.n++, channel: p.channel, at, text: p.text.slice(i, i + CHUNK_CHARS), cutBytes: p.cut });
      }
    }
    this.pending = [];
    this.pendingChars = 0;
    this.chain = this.chain.then(() =>
      this.write(chunks).catch((err: unknown) => {
        if (!this.failed) this.o.onError?.(err);
        this.failed = true;
      }),
    );
  }
}
