import { randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { Agent, createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, isIP, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { addressRangeOf, hostAddresses } from '../../environment';
import { compileAllow, matchAllow, normaliseHost, type AllowRule } from './allow-match';
import type { GatewayReply, GatewayRequest, ProxiedGateway } from '../gateway/exchange';
import { KeptConnections } from '../gateway/kept-connections';
import type { EgressAttempt } from './audit';
import type { RequestHead } from './http1-request';
import { firstRequestShape, ProxyConnection, type ExchangeHandler } from './proxy-connection';

export interface EgressProxyOptions {
  /** Manifest `network.allow` patterns. */
  allow: readonly string[];
  /**
   * `network.allowOverride`: the patterns whose targets may be private or host addresses. Any
   * other pattern's target at such an address (a name resolving there, against DNS rebinding and
   * `/etc/hosts` entries; an address listed without the override) is refused.
   */
  overrides: readonly string[];
  /**
   * The one address the proxy serves (its sandbox's container); a connection from any other is
   * closed and recorded. The host's INPUT rules refuse those first; this holds if they are missing.
   */
  peer?: string;
  /** This machine's addresses, which count like private ones; defaults to its interfaces. */
  hostAddresses?: readonly string[];
  runId: string | null;
  leaseId: string | null;
  /**
   * Called at a refusal; for an allowed exchange twice under one `id`: when it starts (`endedAt`
   * null; the proxy dials only once that record is written, so a host killed mid-request leaves it)
   * and when it ends (with its byte counts).
   */
  record(attempt: EgressAttempt): unknown;
  /** Name resolution; the proxy resolves names itself so the sandbox never needs DNS. */
  resolve?: (host: string) => Promise<string>;
  now?: () => number;
  /**
   * The model gateway, when the manifest has one: requests addressed to the proxy itself (origin
   * form `POST /v1/...`, or an absolute URL naming the proxy's own address) are its, with `path`
   * the request's path and query. Other requests are proxied as ever. A connection that begins
   * with an origin-form request is read by the proxy's own strict reader (gateway-connection.ts)
   * and handed to Node's server at the first request of another shape.
   */
  gateway?: ProxiedGateway;
}

type Verdict = { ok: true; address: string; rule: AllowRule } | { ok: false; status: number; reason: string };

/** Bound on a request's header block; larger ones are refused (431) and recorded. */
const MAX_HEADER_BYTES = 16 * 1024;

/**
 * Headers that describe one connection, not the message (RFC 9110 7.6.1): never passed on, in
 * either direction, together with those the Connection header names. The proxy keeps its own
 * connections to targets alive (`upstreamAgent`) and Node manages the sandbox's connection.
 */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate'];

/** Methods whose request may go over a kept connection: a target that closed it meanwhile fails one that changed nothing. */
const REUSABLE = new Set(['GET', 'HEAD', 'OPTIONS']);
/** An answer's framing, which the proxy's own reply writes itself. */
const ANSWER_FRAMING = new Set(['content-length', 'transfer-encoding']);

function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out = { ...headers };
  const named = typeof headers.connection === 'string' ? headers.connection.split(',').map((h) => h.trim().toLowerCase()) : [];
  for (const h of [...HOP_BY_HOP, ...named]) if (h !== 'transfer-encoding' && h !== 'upgrade') delete out[h];
  return out;
}

const AUTHORITY = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/;

/**
 * The host-side egress proxy of one sandbox: HTTP CONNECT tunnels and absolute-form plain HTTP,
 * only to `host:port` pairs the manifest allows. Every attempt, allowed or denied, is recorded.
 */
export class EgressProxy {
  private readonly rules: AllowRule[];
  private readonly server: Server;
  /** Accepts connections: the peer check, then the gateway's reader or Node's server. */
  private readonly front: NetServer;
  private readonly sockets = new Set<Socket | Duplex>();
  private readonly overrides: Set<string>;
  private readonly host: Set<string>;
  private self: string | undefined;
  /**
   * Connections to allowed targets kept for the next request (keyed by the address the verdict
   * checked, so a kept connection always goes where a check just said it may): a sandbox's client
   * that opens a connection per request (wget, a package manager's probes) no longer costs a
   * connect and a target-side accept per request too. Idle ones close after a few seconds.
   */
  /** The same for GETs the proxy's own reader serves, by checked address and port. */
  private readonly kept = new Map<string, KeptConnections>();
  private readonly upstreamAgent = new Agent({ keepAlive: true, maxFreeSockets: 16, timeout: 4000, scheduling: 'lifo' });

  constructor(private readonly o: EgressProxyOptions) {
    this.rules = compileAllow(o.allow);
    this.overrides = new Set(o.overrides);
    this.host = new Set((o.hostAddresses ?? hostAddresses()).map((a) => a.toLowerCase()));
    // Node's parser (llhttp, strict) refuses what could be read two ways: Content-Length with
    // Transfer-Encoding, duplicate lengths, bad chunking, headers over the size bound.
    this.server = createServer({ maxHeaderSize: MAX_HEADER_BYTES, insecureHTTPParser: false }, (req, res) => void this.forward(req, res));
    this.server.on('clientError', (err: Error & { code?: string; reason?: string; rawPacket?: Buffer }, socket: Duplex) => this.refuseUnparsed(err, socket));
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket, head));
    this.front = createNetServer((s) => this.accept(s));
  }

  private accept(s: Socket): void {
    const from = (s.remoteAddress ?? '').replace(/^::ffff:/, '');
    if (this.o.peer !== undefined && from !== this.o.peer) {
      const local = `${s.localAddress?.replace(/^::ffff:/, '')}:${s.localPort}`;
      this.attempt('TCP', local, 'deny', `connection to the egress proxy from ${from} refused: only this sandbox's container (${this.o.peer}) may use it`);
      s.destroy();
      return;
    }
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    let first: Buffer = Buffer.alloc(0);
    const sniff = (d: Buffer) => {
      first = first.length ? Buffer.concat([first, d]) : d;
      const shape = firstRequestShape(first, this.o.gateway !== undefined);
      if (shape === 'more') return;
      s.off('data', sniff);
      if (shape === 'no') return this.handOff(s, first);
      new ProxyConnection(s, first, {
        route: (head) => this.route(head),
        handOff: (sock, rest) => this.handOff(sock, rest),
        // The gateway's requests are refused here; a proxied request's refusal is Node's, as before this reader.
        refused: (method, target, reason) => {
          if (shape !== 'gateway') return false;
          this.attempt(method, target, 'deny', reason);
          return true;
        },
      });
    };
    s.on('data', sniff);
  }

  /**
   * The requests the proxy's own reader serves: the gateway's (origin-form), and a proxied GET with
   * no body to a target that is not the proxy itself. Anything else goes to Node's server.
   */
  private route(head: RequestHead): ExchangeHandler | null {
    if (!head.absolute) {
      const gateway = this.o.gateway;
      return gateway ? (request, reply) => gateway.serve(request, reply) : null;
    }
    if (head.method !== 'GET' || head.contentLength !== 0) return null;
    return (request, reply) => void this.forwardGet(request, reply);
  }

  /** Node's server takes a connection from here on, `rest` being bytes read from it and not consumed. */
  private handOff(s: Socket, rest: Buffer): void {
    s.pause();
    if (rest.length) s.unshift(rest);
    this.server.emit('connection', s);
    s.resume();
  }

  /** Starts listening; `host` is the sandbox network's gateway address (or loopback in tests). */
  async listen(host: string, port = 0): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.front.once('error', reject);
      this.front.listen(port, host, () => resolve());
    });
    const a = this.front.address() as AddressInfo;
    this.self = `${normaliseHost(a.address)}:${a.port}`;
    return a;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.upstreamAgent.destroy();
    for (const k of this.kept.values()) k.close();
    await new Promise<void>((resolve) => this.front.close(() => resolve()));
  }

  /** A request the parser refused: recorded with the parser's reason and what the request line said. */
  private refuseUnparsed(err: Error & { code?: string; reason?: string; rawPacket?: Buffer }, socket: Duplex): void {
    // A peer that hung up or stalled is not a refused request.
    if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || !socket.writable) return void socket.destroy();
    const line = /^([A-Z]{1,20}) (\S{1,2048})/.exec(err.rawPacket?.toString('latin1', 0, 2100) ?? '');
    const overflow = err.code === 'HPE_HEADER_OVERFLOW';
    const why = overflow ? `headers larger than ${MAX_HEADER_BYTES} bytes` : (err.reason ?? err.message);
    this.attempt(line?.[1] ?? '?', line?.[2] ?? '', 'deny', `request refused while parsing: ${err.code ?? 'parse error'} (${why})`);
    socket.end(overflow ? 'HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' : 'HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  }

  private attempt(method: string, target: string, decision: 'allow' | 'deny', reason: string, bytesOut = 0, bytesIn = 0): void {
    const at = (this.o.now ?? Date.now)();
    void this.o.record({ at, runId: this.o.runId, leaseId: this.o.leaseId, method, target, decision, reason, bytesOut, bytesIn, count: 1, id: null, endedAt: at });
  }

  /** An allowed exchange: recorded (and written) before it is dialled; `end` completes the same record. */
  private async started(method: string, target: string, reason: string): Promise<{ end(reason: string, bytesOut: number, bytesIn: number): void }> {
    const now = this.o.now ?? Date.now;
    const at = now();
    const base = { at, runId: this.o.runId, leaseId: this.o.leaseId, method, target, decision: 'allow' as const, count: 1, id: `egr_${randomUUID()}` };
    await Promise.resolve(this.o.record({ ...base, reason, bytesOut: 0, bytesIn: 0, endedAt: null })).catch(() => {});
    return { end: (why, bytesOut, bytesIn) => void this.o.record({ ...base, reason: why, bytesOut, bytesIn, endedAt: now() }) };
  }

  /** Decides one target; `hostHeader` must name the same authority when present. */
  private async decide(host: string, port: number, hostHeader: string | undefined, defaultPort: number): Promise<Verdict> {
    if (hostHeader !== undefined) {
      const m = AUTHORITY.exec(hostHeader);
      const hh = m ? normaliseHost(m[1]!) : normaliseHost(hostHeader);
      const hp = m ? Number(m[2]) : defaultPort;
      if (hh !== normaliseHost(host) || hp !== port) return { ok: false, status: 403, reason: `Host header "${hostHeader}" does not match the target` };
    }
    const rule = matchAllow(this.rules, host, port);
    if (!rule) return { ok: false, status: 403, reason: isIP(normaliseHost(host)) ? 'IP literal not in the allow list' : 'not in the allow list' };
    const name = normaliseHost(host);
    let address: string;
    try {
      address = isIP(name) ? name : await (this.o.resolve ?? defaultResolve)(name);
    } catch {
      return { ok: false, status: 502, reason: `cannot resolve ${name}` };
    }
    // Checked at connect time, on the address actually dialled: a name that resolved publicly at
    // validation may resolve privately now (DNS rebinding).
    if (!this.overrides.has(rule.pattern)) {
      const bare = address.toLowerCase().replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
      const what = this.host.has(bare) ? "this host's address" : isPrivateAddress(address) ? 'the private address' : undefined;
      if (what) {
        const subject = isIP(name) ? `${name} is` : `${name} resolves to`;
        return { ok: false, status: 403, reason: `${subject} ${what} ${address} and ${rule.pattern} is not in network.allowOverride` };
      }
    }
    return { ok: true, address, rule };
  }

  /**
   * A proxied GET read by the proxy's own reader: the same checks, records and headers as
   * {@link forward}, sent over a kept connection to the checked address written and read by hand.
   */
  private async forwardGet(req: GatewayRequest, reply: GatewayReply): Promise<void> {
    const url = new URL(req.path);
    const port = Number(url.port || 80);
    const target = `${url.hostname}:${port}`;
    const refuse = (status: number, text: string) => {
      const body = Buffer.from(text);
      reply.head(status, [['content-type', 'text/plain']], body.length);
      reply.write(body);
      reply.end();
    };
    if (this.o.gateway && `${normaliseHost(url.hostname)}:${port}` === this.self) return this.o.gateway.serve({ ...req, path: `${url.pathname}${url.search}` }, reply);
    const v = await this.decide(url.hostname, port, req.header('host'), 80);
    if (!v.ok) {
      this.attempt('GET', target, 'deny', v.reason);
      return refuse(v.status, `berth egress proxy: ${target} denied: ${v.reason}\n`);
    }
    const rec = await this.started('GET', target, v.rule.pattern);
    let head = `GET ${url.pathname}${url.search} HTTP/1.1\r\n`;
    for (const [k, value] of Object.entries(endToEnd(req.headers()))) head += `${k}: ${value as string}\r\n`;
    head += 'connection: keep-alive\r\n\r\n';
    const key = `${v.address}:${port}`;
    let kept = this.kept.get(key);
    if (!kept) this.kept.set(key, (kept = new KeptConnections({ host: v.address, port, tls: false })));
    let inb = 0;
    const up = kept.send(head, null, {
      head: (h) => {
        const named = new Set(h.headers.filter(([k]) => k === 'connection').flatMap(([, x]) => x.split(',').map((t) => t.trim().toLowerCase())));
        reply.head(h.status, h.headers.filter(([k]) => !ANSWER_FRAMING.has(k) && !HOP_BY_HOP.includes(k) && !named.has(k)), h.length);
      },
      data: (d) => {
        inb += d.length;
        reply.write(d);
      },
      end: () => {
        reply.end();
        rec.end(v.rule.pattern, 0, inb);
      },
      fail: (err, answered) => {
        rec.end(`${v.rule.pattern} (upstream error: ${err.message})`, 0, inb);
        if (answered) return reply.destroy();
        reply.head(502, [], 0);
        reply.end();
      },
    });
    reply.onAbort(() => up.abort());
  }

  private async tunnel(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => {});
    const target = req.url ?? '';
    const m = AUTHORITY.exec(target);
    const refuse = (status: number, reason: string) => {
      this.attempt('CONNECT', target, 'deny', reason);
      client.end(`HTTP/1.1 ${status} ${status === 403 ? 'Forbidden' : status === 400 ? 'Bad Request' : 'Bad Gateway'}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    };
    if (!m) return refuse(400, 'CONNECT target is not host:port');
    const port = Number(m[2]);
    const v = await this.decide(m[1]!, port, req.headers.host, port);
    if (!v.ok) return refuse(v.status, v.reason);
    const rec = await this.started('CONNECT', target, v.rule.pattern);
    const upstream = connect(port, v.address);
    let out = head.length;
    let inb = 0;
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    client.on('data', (d: Buffer) => (out += d.length));
    upstream.on('data', (d: Buffer) => (inb += d.length));
    let done = false;
    const finish = (reason: string) => {
      if (done) return;
      done = true;
      rec.end(reason, out, inb);
      upstream.destroy();
      client.destroy();
    };
    upstream.on('error', () => finish(`${v.rule.pattern} (upstream error)`));
    upstream.on('close', () => finish(v.rule.pattern));
    client.on('close', () => finish(v.rule.pattern));
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    if (this.o.gateway && req.url?.startsWith('/')) return this.o.gateway.handle(req, res, req.url);
    let url: URL;
    try {
      url = new URL(req.url ?? '');
      if (url.protocol !== 'http:') throw new Error('scheme');
    } catch {
      this.attempt(method, req.url ?? '', 'deny', 'not an absolute http:// proxy request');
      res.writeHead(400, { connection: 'close' }).end('berth egress proxy: absolute http:// URLs only\n');
      return;
    }
    const port = Number(url.port || 80);
    const target = `${url.hostname}:${port}`;
    // A client that honours http_proxy without no_proxy asks the proxy for the gateway's own URL.
    if (this.o.gateway && `${normaliseHost(url.hostname)}:${port}` === this.self) return this.o.gateway.handle(req, res, `${url.pathname}${url.search}`);
    const v = await this.decide(url.hostname, port, req.headers.host, 80);
    if (!v.ok) {
      this.attempt(method, target, 'deny', v.reason);
      res.writeHead(v.status, { connection: 'close' }).end(`berth egress proxy: ${target} denied: ${v.reason}\n`);
      return;
    }
    // The body waits in the paused request while the start is written.
    const rec = await this.started(method, target, v.rule.pattern);
    let out = 0;
    let inb = 0;
    const headers = endToEnd(req.headers);
    const agent = REUSABLE.has(method) ? this.upstreamAgent : false;
    const up = httpRequest({ host: v.address, port, method, path: `${url.pathname}${url.search}`, headers, setHost: false, agent }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, endToEnd(ur.headers));
      ur.on('data', (d: Buffer) => (inb += d.length));
      ur.pipe(res);
      ur.on('end', () => rec.end(v.rule.pattern, out, inb));
    });
    up.on('error', (err) => {
      rec.end(`${v.rule.pattern} (upstream error: ${err.message})`, out, inb);
      if (!res.headersSent) res.writeHead(502, { connection: 'close' });
      res.end();
    });
    req.on('data', (d: Buffer) => (out += d.length));
    req.pipe(up);
  }
}

async function defaultResolve(host: string): Promise<string> {
  // IPv4 first: a sandbox's targets are far more often reachable over v4 from the host.
  return (await lookup(host, { verbatim: false })).address;
}

/** Private, loopback, link-local or unspecified, in IPv4, IPv6 or IPv4-mapped IPv6 form. */
export function isPrivateAddress(address: string): boolean {
  return addressRangeOf(address) !== undefined;
}
