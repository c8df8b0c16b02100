import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { mcpWorld } from '../support/mcp-world';

let world: Awaited<ReturnType<typeof mcpWorld>> | undefined;
afterEach(async () => {
  await world?.cleanup();
  world = undefined;
});

/** Writes `raw` on a new connection to `url`'s port and reads until the server closes it. */
function rawRequest(url: string, raw: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(u.port), u.hostname);
    let got = '';
    socket.setEncoding('utf8').on('data', (d: string) => (got += d));
    // The server may close while the rest of the request is still being written.
    socket.on('error', () => {});
    socket.on('close', () => resolve(got));
    socket.write(raw);
  });
}

/** One POST through node:http, which sends no Accept header unless given one (fetch always adds one). */
function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
      let got = '';
      res.setEncoding('utf8').on('data', (d: string) => (got += d));
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body: got }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('berth mcp --http: what a client accepts (Accept)', { timeout: 120_000 }, () => {
  it('answers a client that accepts JSON alone (curl, a plain HTTP client) with one JSON body, also when it asks for progress, and an SSE-only one with a stream; refuses one that accepts neither with 406 naming what Accept must include', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const base = { 'content-type': 'application/json', authorization: `Bearer ${server.token()}` };
    // A progress token asks for a stream; a client that cannot read one gets the result alone.
    const list = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { progressToken: 'p' } } });
    for (const accept of ['application/json', '*/*', 'application/*;q=0.9', 'text/html, application/json;q=0.5', undefined]) {
      const r = await post(server.url, accept === undefined ? base : { ...base, accept }, list);
      // Before: 406 'Not Acceptable: Client must accept both application/json and text/event-stream'.
      expect(r.status, `${accept}: ${r.body}`).toBe(200);
      expect(r.type, String(accept)).toMatch(/^application\/json/);
      expect(JSON.parse(r.body).result.tools.length, String(accept)).toBeGreaterThan(0);
    }
    const sse = await post(server.url, { ...base, accept: 'text/event-stream' }, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list' }));
    expect(sse.status, sse.body).toBe(200);
    expect(sse.type).toMatch(/^text\/event-stream/);
    expect(sse.body).toMatch(/^data: .*"id":4/m);
    for (const accept of ['text/html', 'application/json;q=0', 'image/*, text/plain']) {
      const r = await post(server.url, { ...base, accept }, list);
      expect(r.status, accept).toBe(406);
      const error = JSON.parse(r.body).error as { message: string; data: { code: string } };
      expect(error.data.code, accept).toBe('not_acceptable');
      expect(error.message, accept).toContain('Accept must include application/json or text/event-stream');
      expect(error.message, accept).toContain(JSON.stringify(accept));
    }
  });
});

describe('berth mcp --http: requests its parser refuses', { timeout: 300_000 }, () => {
  it('answers request headers over the limit (a 100 KB cookie) with 431 and a typed JSON-RPC error, and serves the next client', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const u = new URL(server.url);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const answer = await rawRequest(
      server.url,
      `POST /mcp HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${server.token()}\r\nContent-Type: application/json\r\nCookie: a=${'a'.repeat(100_000)}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    const json = JSON.parse(answer.split('\r\n\r\n', 2)[1] || 'null') as { error?: unknown } | null;
    expect(json?.error, answer.slice(0, 300)).toMatchObject({ code: -32600, data: { code: 'request_headers_too_large' } });
    const client = await w.connectHttp(server.url, server.token());
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });

  it('answers a body that is JSON but no JSON-RPC message (an object as id, an empty batch) with 400 and -32600 invalid_request in one line, as stdio does, not a parse error', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token()}` };
    for (const body of [{ jsonrpc: '2.0', id: { a: 1 }, method: 'tools/list' }, []]) {
      const res = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body) });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const json = (await res.json()) as { error: { code: number; message: string; data: { code: string } } };
      expect(json.error, JSON.stringify(body)).toMatchObject({ code: -32600, data: { code: 'invalid_request' } });
      expect(json.error.message).toMatch(/^invalid_request: the request body /);
      expect(json.error.message).not.toContain('\n');
    }
    const client = await w.connectHttp(server.url, server.token());
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });
});
