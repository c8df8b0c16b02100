import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { EgressProxy, type EgressAttempt } from '../../host/egress';
import { ModelGateway, type GatewayLedger } from '../../host/gateway';
import { startModelServer, type ModelServer } from '../support/model-server';

const KEY = 'sk-own-reader-0123456789';
let server: ModelServer | undefined;
let proxy: EgressProxy | undefined;
let gateway: ModelGateway | undefined;
let extra: Server | undefined;
afterEach(async () => {
  await proxy?.close();
  gateway?.close();
  await server?.close();
  if (extra) {
    extra.closeAllConnections();
    await new Promise((r) => extra!.close(r));
  }
  proxy = gateway = server = extra = undefined;
});

const ledger: GatewayLedger = { account: async () => ({ runId: 'run_1', spentTokens: 0 }), entry: () => {}, spend: () => {}, settle: async () => {} };

/** A real egress proxy on loopback serving the gateway (to `providerUrl`, the scripted server by default) and allowing `allow`. */
async function start(o: { providerUrl?: string; allow?: string[]; record?: (a: EgressAttempt) => unknown } = {}) {
  server = await startModelServer(() => ({ content: 'hi there' }));
  gateway = new ModelGateway({
    spec: { providerBaseUrl: o.providerUrl ?? server.url, key: { env: 'K' }, models: ['small'], budgetTokens: null },
    ledger,
    log: pino({ level: 'silent' }),
    keySource: { env: () => KEY, file: async () => '' },
  });
  const attempts: EgressAttempt[] = [];
  proxy = new EgressProxy({ allow: o.allow ?? [], overrides: o.allow ?? [], runId: 'run_1', leaseId: 'lease_1', record: o.record ?? ((a) => attempts.push(a)), gateway });
  const { port } = await proxy.listen('127.0.0.1');
  return { port, attempts };
}

/** Sends raw bytes on one connection; resolves with what came back once `done(text)` holds or the proxy closed the connection. */
function exchange(port: number, text: string | string[], done: (got: string) => boolean = () => false): Promise<{ got: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    const bail = setTimeout(() => (s.destroy(), reject(new Error(`no complete answer within 20 s; got ${JSON.stringify(got)}`))), 20_000);
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (done(got)) {
        clearTimeout(bail);
        s.destroy();
        resolve({ got, closed: false });
      }
    });
    s.on('close', () => (clearTimeout(bail), resolve({ got, closed: true })));
    s.on('error', () => {});
    for (const t of [text].flat()) s.write(t);
  });
}

const body = JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'hello' }] });
const post = (extraHeaders = '', b = body) => `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n${extraHeaders}Content-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
const answers = (got: string) => got.split('HTTP/1.1 ').slice(1).map((a) => Number(a.slice(0, 3)));

describe("the egress proxy's own reader of the sandbox's requests", () => {
  it('refuses smuggling shapes on a gateway connection with 400, records each, closes the connection and never reaches the provider', async () => {
    const g = await start();
    const smuggled = post();
    const shapes: Array<[string, string]> = [
      [`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`, 'Transfer-Encoding with Content-Length'],
      [`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`, 'duplicate Content-Length header'],
      [`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-A: 1\r\n Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`, 'obsolete line folding'],
      [`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`, 'bare LF in the request head'],
      [`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: +${smuggled.length}\r\n\r\n${smuggled}`, 'invalid Content-Length'],
    ];
    for (const [bytes] of shapes) {
      const r = await exchange(g.port, bytes);
      expect([r.closed, answers(r.got)]).toEqual([true, [400]]);
    }
    expect(server!.requests).toEqual([]);
    expect(g.attempts.map((a) => [a.method, a.target, a.decision, a.reason])).toEqual(shapes.map(([, why]) => ['POST', '/v1/chat/completions', 'deny', `request refused while parsing: ${why}`]));
  });

  it('refuses a head over 16 KiB with 431 without waiting for its end', async () => {
    const g = await start();
    const r = await exchange(g.port, `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Pad: ${'a'.repeat(17_000)}`);
    expect([r.closed, answers(r.got)]).toEqual([true, [431]]);
    expect(g.attempts).toHaveLength(1);
  });

  it('answers requests one after another on a kept connection, and requests sent ahead in order', async () => {
    const g = await start();
    const r = await exchange(g.port, [post(), post() + post('Connection: close\r\n')]);
    expect(answers(r.got)).toEqual([200, 200, 200]);
    expect(r.closed).toBe(true);
    expect(server!.requests.map((q) => q.authorization)).toEqual([`Bearer ${KEY}`, `Bearer ${KEY}`, `Bearer ${KEY}`]);
    expect(r.got).not.toContain(KEY);
    expect(g.attempts).toEqual([]);
  });

  it("hands a request it does not serve itself (a chunked body) to Node's server, which serves it through the gateway, after one it did serve", async () => {
    const g = await start();
    const chunked = `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const r = await exchange(g.port, post() + chunked);
    expect(answers(r.got)).toEqual([200, 200]);
    expect(server!.requests).toHaveLength(2);
    expect(g.attempts).toEqual([]);
  });

  it("hands a CONNECT after a gateway request on the same connection to Node's server, which refuses it as ever", async () => {
    const g = await start();
    const r = await exchange(g.port, `${post()}CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n`, (got) => answers(got).length === 2);
    expect(answers(r.got)).toEqual([200, 403]);
    expect(g.attempts.map((a) => [a.method, a.target, a.decision])).toEqual([['CONNECT', 'denied.test:443', 'deny']]);
  });

  it('sends the provider the body as the gateway read it when the body names its model twice', async () => {
    // A raw provider: what it is sent, byte for byte.
    const seen: string[] = [];
    extra = createServer((req, res) => {
      let b = '';
      req.on('data', (d) => (b += d));
      req.on('end', () => {
        seen.push(b);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ model: 'small', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } }));
      });
    });
    await new Promise<void>((r) => extra!.listen(0, '127.0.0.1', r));
    const g = await start({ providerUrl: `http://127.0.0.1:${(extra.address() as AddressInfo).port}/v1` });
    // The gateway's JSON.parse reads the last "model"; a provider's parser may read the first.
    const twice = '{"model":"large","messages":[{"role":"user","content":"hi"}],"model":"small"}';
    const r = await exchange(g.port, post('Connection: close\r\n', twice));
    expect(answers(r.got)).toEqual([200]);
    expect(seen).toHaveLength(1);
    expect(JSON.parse(seen[0]!)).toEqual({ model: 'small', messages: [{ role: 'user', content: 'hi' }] });
    expect(seen[0]).not.toContain('large');
  });

  it('serves a proxied GET only once its start record is written, with the same checks: a denied target is refused and recorded', async () => {
    let targetRequests = 0;
    extra = createServer((_req, res) => {
      targetRequests += 1;
      res.end('ok\n');
    });
    await new Promise<void>((r) => extra!.listen(0, '127.0.0.1', r));
    const tport = (extra.address() as AddressInfo).port;
    const records: EgressAttempt[] = [];
    let release: () => void = () => {};
    const written = new Promise<void>((r) => (release = r));
    const g = await start({
      allow: [`127.0.0.1:${tport}`],
      record: (a) => {
        records.push(a);
        // The start of an allowed exchange is written slowly: the proxy must wait for it.
        return a.endedAt === null ? written : undefined;
      },
    });
    const get = (host: string, port: number) => `GET http://${host}:${port}/x HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: close\r\n\r\n`;
    const pending = exchange(g.port, get('127.0.0.1', tport));
    for (let i = 0; i < 200 && records.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(records.map((a) => [a.method, a.decision, a.endedAt])).toEqual([['GET', 'allow', null]]);
    await new Promise((r) => setTimeout(r, 200));
    expect(targetRequests).toBe(0);
    release();
    const r = await pending;
    expect(answers(r.got)).toEqual([200]);
    expect(r.got.endsWith('ok\n')).toBe(true);
    expect(targetRequests).toBe(1);
    for (let i = 0; i < 200 && records.length < 2; i++) await new Promise((r) => setTimeout(r, 25));
    expect(records[1]).toMatchObject({ method: 'GET', decision: 'allow', id: records[0]!.id, bytesIn: 3 });
    const denied = await exchange(g.port, get('127.0.0.1', tport + 1));
    expect(answers(denied.got)).toEqual([403]);
    expect(records.at(-1)).toMatchObject({ method: 'GET', target: `127.0.0.1:${tport + 1}`, decision: 'deny' });
  });
});
