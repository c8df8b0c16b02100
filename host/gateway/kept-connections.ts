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

/**
 * Kept-alive connections to one destination (the model provider, or an egress target), HTTP/1.1
 * written and read by hand (Node's http client was about half of a forwarding hop's cost on a
 * loopback completion): a request takes an idle connection or opens one, and gives it back once
 * its answer has been read whole and the other side let it be kept. Plain TCP, or TLS with the
 * certificate checked against the host name.
 */
export class KeptConnections {
  private readonly idle: Socket[] = [];
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
    for (const s of this.idle.splice(0)) s.destroy();
  }

  /** Sends `head` (a request head ending in its blank line) and `body`; the answer goes to `sink`. */
  send(head: string, body: Buffer | null, sink: ExchangeSink): Exchange {
    const socket = this.take();
    let answered = false;
    let settled = false;
    const reader = new AnswerReader({
      head: (h) => {
        answered = true;
        sink.head(h);
      },
      data: (d) => sink.data(d),
      end: () => {
        settled = true;
        detach();
        sink.end();
      },
    });
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      detach();
      socket.destroy();
      sink.fail(err, answered);
    };
    const onData = (d: Buffer) => {
      try {
        reader.feed(d);
      } catch (err) {
        return fail(err as Error);
      }
      if (reader.done) {
        if (reader.keep && !this.closed) this.release(socket);
        else socket.destroy();
      }
    };
    const onEnd = () => {
      try {
        reader.closed();
      } catch (err) {
        fail(err as Error);
      }
    };
    const onClose = () => fail(new Error('the connection to the provider closed'));
    const onError = (err: Error) => fail(err);
    const detach = () => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onClose);
      socket.off('error', onError);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('close', onClose);
    socket.on('error', onError);
    if (body && body.length) {
      socket.cork();
      socket.write(head, 'latin1');
      socket.write(body);
      socket.uncork();
    } else socket.write(head, 'latin1');
    return { abort: () => fail(new Error('the client closed its connection')) };
  }

  private take(): Socket {
    for (;;) {
      const s = this.idle.pop();
      if (!s) break;
      s.removeAllListeners('close').removeAllListeners('end').removeAllListeners('error').removeAllListeners('data').removeAllListeners('timeout');
      s.setTimeout(0);
      if (!s.destroyed && s.writable) return s;
    }
    const s = this.tls ? tlsConnect({ host: this.host, port: this.port, servername: this.host, ALPNProtocols: ['http/1.1'] }) : netConnect(this.port, this.host);
    s.setNoDelay(true);
    return s;
  }

  /** An idle connection the provider closes, or that idles too long, leaves the pool. */
  private release(s: Socket): void {
    if (this.idle.length >= MAX_IDLE) return void s.destroy();
    const drop = () => {
      const i = this.idle.indexOf(s);
      if (i >= 0) this.idle.splice(i, 1);
      s.destroy();
    };
    s.on('close', drop).on('end', drop).on('error', drop);
    // Bytes on an idle connection are not an answer to anything: it cannot be trusted for the next one.
    s.on('data', drop);
    s.setTimeout(IDLE_MS, drop);
    this.idle.push(s);
  }
}
