import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Berth } from '../api/berth';
import { BerthError } from '../errors';
import { answerClientErrors } from '../support/client-errors';
import { allowedHosts, HOST_REFUSED_STATUS, hostAllowed, hostRefusal } from '../support/host-header';
import { createMcpServer } from './mcp-server';
import type { McpSessions } from './mcp-session';
import { readBounded } from './http-body';
import { acceptable, notAcceptable, presentBoth, type Acceptable } from './http-accept';
import { CALLER_HEADER, callerOf, InFlight, initializes, newCaller } from './http-cancel';
import { notJsonRpc, STDIO_MAX_MESSAGE_BYTES } from './stdio-transport';

export interface McpHttpOptions {
  host: string;
  port: number;
  /** The bearer token every request must carry; null only on loopback (the caller checks). */
  token: string | null;
}

const same = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

function refuse(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}, rpcCode = -32001): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: rpcCode, message: `${code}: ${message}`, data: { code } } }));
}

/**
 * The body of a POST as a JSON-RPC message, or the refusal already sent. One limit for both
 * transports: the SDK's HTTP transport refused anything over 4 MiB (a 5 MiB write_file that stdio
 * takes) with an untyped 413, and read what it took whole.
 */
async function messageOf(req: IncomingMessage, res: ServerResponse): Promise<{ message: unknown } | null> {
  const body = await readBounded(req, STDIO_MAX_MESSAGE_BYTES);
  if (body.kind === 'too_large') {
    const size = body.bytes === null ? `over ${STDIO_MAX_MESSAGE_BYTES} bytes` : `${body.bytes} bytes`;
    // A body past what is drained was not read to its end: the connection ends with the answer.
    if (!body.drained) res.once('finish', () => req.destroy());
    refuse(res, 413, 'request_too_large', `the message is ${size}; berth mcp reads messages up to ${STDIO_MAX_MESSAGE_BYTES} bytes (on stdio as over HTTP)`, { connection: 'close' }, -32600);
    return null;
  }
  let message: unknown;
  try {
    message = JSON.parse(body.text);
  } catch (err) {
    refuse(res, 400, 'parse_error', `the request body is not JSON (${(err as Error).message})`, {}, -32700);
    return null;
  }
  // As on stdio: JSON that is no JSON-RPC message is an invalid request; the SDK called it a parse error.
  const items = Array.isArray(message) ? message : [message];
  if (items.length === 0) {
    refuse(res, 400, 'invalid_request', 'the request body is an empty batch; send a JSON-RPC 2.0 message', {}, -32600);
    return null;
  }
  for (const [i, item] of items.entries()) {
    const parsed = JSONRPCMessageSchema.safeParse(item);
    if (parsed.success) continue;
    refuse(res, 400, 'invalid_request', `${Array.isArray(message) ? `message ${i} of the batch` : 'the request body'} ${notJsonRpc(item, parsed.error.issues[0], '')}`, {}, -32600);
    return null;
  }
  return { message };
}

/** Whether a POST's message is (or its batch holds) a request asking for progress (`_meta.progressToken`, call-progress.ts). */
function asksProgress(message: unknown): boolean {
  const asked = (m: unknown) => (m as { params?: { _meta?: { progressToken?: unknown } } } | null)?.params?._meta?.progressToken !== undefined;
  return Array.isArray(message) ? message.some(asked) : asked(message);
}

/**
 * Whether a POST is answered as an SSE stream rather than one JSON body: when a request in it asked
 * for progress from a client that names streams in its Accept, or the client takes nothing else. In one JSON
 * body a notification has no place, so an HTTP client that resets its request timeout on progress
 * (the SDK's `resetTimeoutOnProgress`) gave up on any command longer than that timeout (60 s by
 * default). Progress is all such a stream would carry (this stateless server sends nothing else
 * while a request runs: no logging, sampling or elicitation), so every other answer is one JSON
 * body, and a client that takes JSON alone gets its result without progress.
 */
function streams(accepts: Acceptable, message: unknown): boolean {
  return accepts.sse && (!accepts.json || (accepts.sseNamed && asksProgress(message)));
}

/**
 * `berth mcp --http`: the same server over Streamable HTTP at `/mcp`, stateless (a server per
 * request): the Berth session, not the HTTP connection, is what a client continues. Every request
 * needs `Authorization: Bearer <token>` (the token of `berth serve`), and a Host header naming
 * this server by `berth serve`'s rule (host/support/host-header.ts), so a page on another origin
 * (DNS rebinding) reaches nothing. Its `initialize` answer names the caller (`Mcp-Session-Id`,
 * http-cancel.ts), so that a `notifications/cancelled` in a later POST reaches the request it names
 * among that caller's requests in flight, and no other client's.
 */
export async function startMcpHttp(berth: Berth, sessions: McpSessions, o: McpHttpOptions): Promise<{ url: string; close(): Promise<void> }> {
  // Filled once listening: the port may be 0 until then, and no request arrives before.
  let hosts: ReadonlySet<string> = new Set();
  let url = '';
  const inFlight = new InFlight();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') return refuse(res, 404, 'not_found', 'the MCP endpoint is /mcp');
    if (!hostAllowed(req.headers.host, hosts)) return refuse(res, HOST_REFUSED_STATUS, 'host_refused', hostRefusal(req.headers.host, url, 'berth mcp'));
    if (o.token !== null) {
      const given = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
      if (!same(given, o.token)) return refuse(res, 401, 'unauthorized', 'wrong or missing bearer token (the token is in the file berth mcp names)');
    }
    // Stateless: a GET's stream would be held open with nothing ever to carry (each request has its
    // own server, gone with it), and there is no HTTP session for a DELETE to end. The SDK client
    // takes 405 as "no stream" and goes on.
    if (req.method !== 'POST') return refuse(res, 405, 'method_not_allowed', `${req.method} /mcp: this server is stateless and takes POST only`, { allow: 'POST' });
    const accepts = acceptable(req.headers.accept);
    if (!accepts.json && !accepts.sse) return refuse(res, 406, 'not_acceptable', notAcceptable(req.headers.accept), {}, -32600);
    const body = await messageOf(req, res);
    if (!body) return;
    const caller = callerOf(req);
    // Before the POST's own requests are held: a batch cancels only requests of other POSTs.
    inFlight.cancel(caller, body.message);
    const server = createMcpServer(berth, sessions);
    const release = inFlight.hold(caller, body.message, server);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !streams(accepts, body.message), maxRequestBodySize: STDIO_MAX_MESSAGE_BYTES });
    res.on('close', () => {
      release();
      void transport.close();
      void server.close();
    });
    if (initializes(body.message)) res.setHeader(CALLER_HEADER, newCaller());
    presentBoth(req);
    await server.connect(transport);
    await transport.handleRequest(req, res, body.message);
  };
  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      berth.logger.error({ err }, 'berth mcp: request failed');
      if (!res.headersSent) refuse(res, 500, 'internal', err instanceof Error ? err.message : String(err));
    });
  });
  answerClientErrors(http, (r) => ({ contentType: 'application/json', body: JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `${r.code}: ${r.message}`, data: { code: r.code } } }) }));
  await new Promise<void>((resolve, reject) => {
    http.once('error', (err) => reject(new BerthError('mcp_listen_failed', `cannot listen on ${o.host}:${o.port}: ${err.message}`)));
    http.listen(o.port, o.host, resolve);
  });
  const { port } = http.address() as AddressInfo;
  const name = o.host.includes(':') ? `[${o.host}]` : o.host;
  hosts = allowedHosts(o.host, port);
  url = `http://${name}:${port}/mcp`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
