/**
 * The reading of a provider's HTTP/1.1 answers on a kept connection, by hand: Node's http client
 * was half of what a forwarded completion cost beyond the completion itself. Strict where a wrong
 * reading would misplace the next answer on the connection (framing); an answer that breaks the
 * framing rules fails the exchange and the connection is not reused.
 */

/** Bound on an answer's head. */
const MAX_ANSWER_HEAD = 64 * 1024;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: [^\r\n]*)?$/;
const HEADER = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*$/;
const CHUNK_SIZE = /^([0-9A-Fa-f]{1,8})(?:;[^\r\n]*)?$/;

export interface AnswerHead {
  status: number;
  /** Lower-cased names, in order, as received. */
  headers: Array<[string, string]>;
  /** The body's length when the answer gave one; null for a chunked or close-delimited body. */
  length: number | null;
  /** Whether the connection can carry the next request once this answer has been read. */
  reusable: boolean;
}

export interface AnswerSink {
  head(h: AnswerHead): void;
  /** A piece of the body, decoded from its chunked framing if it had one. */
  data(chunk: Buffer): void;
  end(): void;
}

type State =
  | { at: 'head' }
  | { at: 'length'; left: number }
  | { at: 'chunk-size' }
  | { at: 'chunk'; left: number }
  | { at: 'chunk-crlf' }
  | { at: 'trailers' }
  | { at: 'until-close' }
  | { at: 'done' };

/** Reads one answer fed in pieces; throws on a framing error (the caller drops the connection). */
export class AnswerReader {
  private buf: Buffer = Buffer.alloc(0);
  private state: State = { at: 'head' };
  private reusable = false;

  constructor(private readonly sink: AnswerSink, private readonly bodiless = false) {}

  get done(): boolean {
    return this.state.at === 'done';
  }

  /** Bytes received after the answer ended (a provider that sent more than it framed). */
  get leftover(): number {
    return this.buf.length;
  }

  /** Whether the connection may be reused, once `done`. */
  get keep(): boolean {
    return this.reusable && this.buf.length === 0;
  }

  feed(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    this.run();
  }

  /** The connection ended: the end of a close-delimited body, an error for any other state. */
  closed(): void {
    if (this.state.at === 'until-close') {
      this.state = { at: 'done' };
      this.sink.end();
      return;
    }
    if (this.state.at !== 'done') throw new Error('the provider closed the connection before the end of its answer');
  }

  private run(): void {
    for (;;) {
      const s = this.state;
      if (s.at === 'done') return;
      if (s.at === 'head') {
        const end = this.buf.indexOf('\r\n\r\n', 0, 'latin1');
        if (end < 0) {
          if (this.buf.length > MAX_ANSWER_HEAD) throw new Error('answer head too large');
          return;
        }
        const lines = this.buf.toString('latin1', 0, end).split('\r\n');
        this.buf = this.buf.subarray(end + 4);
        const m = STATUS_LINE.exec(lines[0]!);
        if (!m) throw new Error('invalid status line');
        const status = Number(m[2]);
        // An interim answer (100 Continue, 103 Early Hints): the real one follows.
        if (status >= 100 && status < 200) continue;
        const headers: Array<[string, string]> = [];
        let length: number | null = null;
        let chunked = false;
        let close = m[1] === '0';
        for (let i = 1; i < lines.length; i++) {
          const h = HEADER.exec(lines[i]!);
          if (!h) throw new Error('invalid answer header');
          const name = h[1]!.toLowerCase();
          const value = h[2]!;
          if (name === 'content-length') {
            if (length !== null || !/^\d{1,15}$/.test(value)) throw new Error('invalid or repeated Content-Length');
            length = Number(value);
          } else if (name === 'transfer-encoding') {
            if (value.toLowerCase() !== 'chunked') throw new Error(`unsupported Transfer-Encoding ${value}`);
            chunked = true;
          } else if (name === 'connection') {
            if (value.toLowerCase().split(',').some((t) => t.trim() === 'close')) close = true;
          }
          headers.push([name, value]);
        }
        if (chunked && length !== null) throw new Error('Transfer-Encoding with Content-Length');
        const noBody = this.bodiless || status === 204 || status === 304;
        this.reusable = !close && (noBody || chunked || length !== null);
        this.sink.head({ status, headers, length: noBody ? 0 : chunked ? null : length, reusable: this.reusable });
        if (noBody || length === 0) this.finish();
        else this.state = chunked ? { at: 'chunk-size' } : length !== null ? { at: 'length', left: length } : { at: 'until-close' };
        continue;
      }
      if (s.at === 'length' || s.at === 'chunk') {
        if (this.buf.length === 0) return;
        const n = Math.min(s.left, this.buf.length);
        const piece = this.buf.subarray(0, n);
        this.buf = this.buf.subarray(n);
        s.left -= n;
        this.sink.data(piece);
        if (s.left === 0) {
          if (s.at === 'length') this.finish();
          else this.state = { at: 'chunk-crlf' };
        }
        continue;
      }
      if (s.at === 'until-close') {
        if (this.buf.length === 0) return;
        const piece = this.buf;
        this.buf = Buffer.alloc(0);
        this.sink.data(piece);
        return;
      }
      if (s.at === 'chunk-crlf') {
        if (this.buf.length < 2) return;
        if (this.buf[0] !== 13 || this.buf[1] !== 10) throw new Error('chunk not followed by CRLF');
        this.buf = this.buf.subarray(2);
        this.state = { at: 'chunk-size' };
        continue;
      }
      // chunk-size and trailers: line by line.
      const eol = this.buf.indexOf('\r\n', 0, 'latin1');
      if (eol < 0) {
        if (this.buf.length > 4096) throw new Error('chunk line too long');
        return;
      }
      const line = this.buf.toString('latin1', 0, eol);
      this.buf = this.buf.subarray(eol + 2);
      if (s.at === 'trailers') {
        if (line === '') this.finish();
        continue;
      }
      const m = CHUNK_SIZE.exec(line);
      if (!m) throw new Error('invalid chunk size');
      const size = parseInt(m[1]!, 16);
      this.state = size === 0 ? { at: 'trailers' } : { at: 'chunk', left: size };
    }
  }

  private finish(): void {
    this.state = { at: 'done' };
    this.sink.end();
  }
}
