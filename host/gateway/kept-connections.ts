import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { AnswerReader, type AnswerSink } from './http1-answer';

/** An idle kept connection is closed after this long: before a provider's own keep-alive timeout ends it under a request. */
const IDLE_MS = 4000;

/** One exchange in flight; `abort` drops its connection (the sandbox's client gave up). */
export interface Exchange {
  abort(): void;
}

export interface ExchangeSink extends AnswerSink {
  /** The exchange failed before its answer ended: `answered` says whether a head was passed on. */
  fail(err: Error, answered: boolean): void;
}

/** Idle connections kept per destination; more are closed when their answer ends. */
const MAX_IDLE = 16;

interface Conn {
  socket: Socket;
  current: InFlight | null;
}

/** One exchange on a connection: its answer's reader, and the end it reports once. */
class InFlight {
  readonly reader: AnswerReader;
  private answered = false;
  private settled = false;

  constructor(
    private readonly sink: ExchangeSink,
    private readonly done: () => void,
  ) {
    this.reader = new AnswerReader({
      head: (h) => {
        this.answered = true;
        sink.head(h);
      },
      data: (d) => sink.data(d),
      end: () => {
        this.settled = true;
        sink.end();
      },
    });
  }

  data(d: Buffer, conn: Conn): void {
    try {
      this.reader.feed(d);
    } catch (err) {
      return this.fail(err as Error, conn);
    }
    if (this.reader.done && conn.current === this) this.done();
  }

  ended(conn: Conn): void {
    try {
      this.reader.closed();
    } catch (err) {
      this.fail(err as Error, conn);
    }
    if (conn.current === this) {
      conn.current = null;
      conn.socket.destroy();
    }
  }

  fail(err: Error, conn: Conn): void {
    if (conn.current === this) conn.current = null;
    if (this.settled) return;
    this.settled = true;
    conn.socket.destroy();
    this.sink.fail(err, this.answered);
  }
}

/**
 * Kept-alive connections to one destination (the model provider, or an egress target), HTTP/1.1
 * written and read by hand (Node's http client was about half of a forwarding hop's cost on a
 * loopback completion): a request takes an idle connection or opens one, and gives it back once
 * its answer has been read whole and the other side let it be kept. Plain TCP, or TLS with the
 * certificate checked against the host name.
 */
export class KeptConnections {
  private readonly idle: Conn[] = [];
  private readonly host: string;
  private readonly port: number;
  private readonly tls: boolean;
  private closed = false;

  constructor(to: { host: string; port: number; tls: boolean }) {
    this.tls = to.tls;
    this.host = to.host.replace(/^\[|\]$/g, '');
    this.port = to.port;
  }

  /** The connections of a base URL (`http:` or `https:`). */
  static of(base: URL): KeptConnections {
    const tls = base.protocol === 'https:';
    return new KeptConnections({ host: base.hostname, port: Number(base.port || (tls ? 443 : 80)), tls });
  }

  /** The `Host` header value these connections send. */
  get authority(): string {
    const name = this.host.includes(':') ? `[${this.host}]` : this.host;
    return this.port === (this.tls ? 443 : 80) ? name : `${name}:${this.port}`;
  }

  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) c.socket.destroy();
  }

  /** Sends `head` (a request head ending in its blank line) and `body`; the answer goes to `sink`. */
  send(head: string, body: Buffer | null, sink: ExchangeSink): Exchange {
    const conn = this.take();
    const x = new InFlight(sink, () => {
      conn.current = null;
      if (x.reader.keep && !this.closed && this.idle.length < MAX_IDLE && !conn.socket.destroyed) {
        this.idle.push(conn);
        conn.socket.setTimeout(IDLE_MS);
      } else conn.socket.destroy();
    });
    conn.current = x;
    const s = conn.socket;
    if (body && body.length) {
      s.cork();
      s.write(head, 'latin1');
      s.write(body);
      s.uncork();
    } else s.write(head, 'latin1');
    return { abort: () => x.fail(new Error('the client closed its connection'), conn) };
  }

  private take(): Conn {
    for (;;) {
      const c = this.idle.pop();
      if (!c) break;
      c.socket.setTimeout(0);
      if (!c.socket.destroyed && c.socket.writable) return c;
    }
    const socket = this.tls ? tlsConnect({ host: this.host, port: this.port, servername: this.host, ALPNProtocols: ['http/1.1'] }) : netConnect(this.port, this.host);
    socket.setNoDelay(true);
    const conn: Conn = { socket, current: null };
    // Listeners set once per connection: an exchange takes the connection's events while it is in flight.
    const gone = (err: Error) => {
      const i = this.idle.indexOf(conn);
      if (i >= 0) this.idle.splice(i, 1);
      if (conn.current) conn.current.fail(err, conn);
      else socket.destroy();
    };
    socket.on('data', (d: Buffer) => {
      // Bytes on an idle connection are not an answer to anything: it cannot be trusted for the next one.
      if (!conn.current) return gone(new Error('bytes on an idle connection'));
      conn.current.data(d, conn);
    });
    socket.on('end', () => (conn.current ? conn.current.ended(conn) : gone(new Error('closed'))));
    socket.on('close', () => gone(new Error('the connection to the destination closed')));
    socket.on('error', (err: Error) => gone(err));
    socket.on('timeout', () => gone(new Error('idle')));
    return conn;
  }
}
