import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { GatewayReply, GatewayRequest } from '../gateway/exchange';
import { MAX_HEAD_BYTES, parseRequestHead, type RequestHead } from './http1-request';

/** Largest request body kept for the gateway; a longer one is drained and refused by the gateway. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;
/**
 * A connection silent this long while no answer is being written is closed: an idle kept one
 * (Node's server: 5 s) or one whose client stopped in the middle of a request. One timer armed
 * once, which traffic pushes back, instead of one set per request.
 */
const SILENT_MS = 5000;
/** While an answer is written the client may send its next request; past this much, reading waits. */
const MAX_AHEAD_BYTES = 64 * 1024;
const VALUE_SAFE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Serves one request read whole; the reply frames the answer. */
export type ExchangeHandler = (request: GatewayRequest, reply: GatewayReply) => void;

export interface ProxyConnectionHooks {
  /** Who serves a request whose head was read; null: Node's server takes the connection from this request on. */
  route(head: RequestHead): ExchangeHandler | null;
  /** Node's server takes the connection with `rest`, bytes read and not consumed. */
  handOff(socket: Socket, rest: Buffer): void;
  /** A head this reader refuses: true when it is answered here (and the connection closed), false to hand it to Node's server as it is. */
  refused(method: string, target: string, reason: string): boolean;
}

/**
 * One connection of the sandbox to its egress proxy, read by hand ({@link parseRequestHead}) and
 * answered with HTTP/1.1 written by hand: Node's server cost a third of a loopback completion
 * through the model gateway.
 * One exchange at a time: what a client sends ahead waits in the buffer (reading pauses past a
 * bound) until the answer ended.
 */
export class ProxyConnection {
  private buf: Buffer;
  private searchFrom = 0;
  private head: RequestHead | null = null;
  private handler: ExchangeHandler | null = null;
  private parts: Buffer[] = [];
  private left = 0;
  private kept = 0;
  private answering = false;
  private stopped = false;
  /** Called if the client goes away while the current exchange is answered. */
  private aborts: Array<() => void> = [];

  constructor(
    private readonly socket: Socket,
    first: Buffer,
    private readonly hooks: ProxyConnectionHooks,
  ) {
    this.buf = first;
    socket.setNoDelay(true);
    socket.on('data', this.onData);
    socket.setTimeout(SILENT_MS);
    // A provider may think for minutes: only a connection with no answer on its way is silent.
    socket.on('timeout', this.onSilent);
    socket.on('error', () => {});
    socket.on('close', () => {
      if (!this.answering) return;
      this.answering = false;
      for (const cb of this.aborts.splice(0)) cb();
    });
    this.pump();
  }

  private readonly onData = (d: Buffer): void => {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    if (this.answering) {
      if (this.buf.length > MAX_AHEAD_BYTES) this.socket.pause();
      return;
    }
    this.pump();
  };

  private readonly onSilent = (): void => {
    if (!this.answering) this.socket.destroy();
  };

  /** This reader is done with the connection (closed, refused, or Node's server has it now). */
  private stop(): void {
    this.stopped = true;
    this.socket.off('data', this.onData);
    this.socket.off('timeout', this.onSilent);
    this.socket.setTimeout(0);
  }

  private pump(): void {
    while (!this.answering && !this.stopped) {
      if (!this.head) {
        if (this.buf.length === 0) return;
        // Searched from where the last search stopped: a head sent a byte at a time costs linear time.
        const end = this.buf.indexOf('\r\n\r\n', this.searchFrom, 'latin1');
        if (end < 0 && this.buf.length <= MAX_HEAD_BYTES) {
          this.searchFrom = Math.max(0, this.buf.length - 3);
          return;
        }
        const p = parseRequestHead(this.buf);
        this.searchFrom = 0;
        if (p.kind === 'more') return;
        if (p.kind === 'other') {
          this.stop();
          return this.hooks.handOff(this.socket, this.buf);
        }
        if (p.kind === 'refused') {
          this.stop();
          if (!this.hooks.refused(p.method, p.target, `request refused while parsing: ${p.reason}`)) return this.hooks.handOff(this.socket, this.buf);
          this.socket.end(`HTTP/1.1 ${p.status} ${STATUS_CODES[p.status]}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
          return;
        }
        const handler = this.hooks.route(p.head);
        if (!handler) {
          this.stop();
          return this.hooks.handOff(this.socket, this.buf);
        }
        this.handler = handler;
        this.head = p.head;
        this.buf = this.buf.subarray(p.head.headBytes);
        this.left = p.head.contentLength;
        this.parts = [];
        this.kept = 0;
      }
      if (this.left > 0) {
        if (this.buf.length === 0) return;
        const n = Math.min(this.left, this.buf.length);
        if (this.kept + n <= MAX_BODY_BYTES) this.parts.push(this.buf.subarray(0, n));
        this.kept += n;
        this.left -= n;
        this.buf = this.buf.subarray(n);
        if (this.left > 0) return;
      }
      this.answer(this.head, this.handler!);
    }
  }

  private answer(head: RequestHead, handler: ExchangeHandler): void {
    this.answering = true;
    const body = this.kept > MAX_BODY_BYTES ? undefined : this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
    this.parts = [];
    const request: GatewayRequest = { method: head.method, path: head.target, header: (name) => head.headers.get(name), headers: () => Object.fromEntries(head.headers), body };
    handler(request, this.reply(head.close));
  }

  /** The exchange ended: the next request, or the end of the connection. */
  private next(close: boolean): void {
    this.head = null;
    this.handler = null;
    this.answering = false;
    this.aborts = [];
    if (close) {
      this.stop();
      this.socket.end();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    this.pump();
  }

  private reply(close: boolean): GatewayReply {
    const s = this.socket;
    let sent = false;
    let chunked = false;
    let ended = false;
    let corked = false;
    // Writes of one turn (head, body, chunk framing) leave in one system call.
    const batch = () => {
      if (corked) return;
      corked = true;
      s.cork();
      process.nextTick(() => {
        corked = false;
        s.uncork();
      });
    };
    return {
      head(status, headers, length) {
        sent = true;
        chunked = length === null;
        let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
        for (const [k, v] of headers) if (VALUE_SAFE.test(v)) text += `${k}: ${v}\r\n`;
        text += chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${length}\r\n`;
        if (close) text += 'connection: close\r\n';
        batch();
        s.write(`${text}\r\n`, 'latin1');
      },
      write(chunk) {
        if (chunk.length === 0) return;
        batch();
        if (chunked) {
          s.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
          s.write(chunk);
          s.write('\r\n', 'latin1');
        } else s.write(chunk);
      },
      end: () => {
        if (ended) return;
        ended = true;
        if (chunked) {
          batch();
          s.write('0\r\n\r\n', 'latin1');
        }
        this.next(close);
      },
      destroy: () => {
        ended = true;
        this.stop();
        s.destroy();
      },
      get headSent() {
        return sent;
      },
      onAbort: (cb) => void this.aborts.push(cb),
    };
  }
}

/**
 * Whether a connection's first bytes may begin a request this reader serves: `gateway` (origin-form),
 * `get` (a proxied GET), `no` (Node's server takes the connection as it is), `more` (too few bytes).
 */
export function firstRequestShape(first: Buffer, gateway: boolean): 'gateway' | 'get' | 'no' | 'more' {
  for (const prefix of gateway ? ['POST /', 'GET /', 'GET http://'] : ['GET http://']) {
    const n = Math.min(first.length, prefix.length);
    if (first.toString('latin1', 0, n) === prefix.slice(0, n) && (n === prefix.length || n === first.length)) return n < prefix.length ? 'more' : prefix.endsWith('//') ? 'get' : 'gateway';
  }
  return 'no';
}
