import { createServer, request, type Server } from 'node:http';
import { readSync } from 'node:fs';
import { connect, type AddressInfo, type Socket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parseEnvironment } from '../../environment';
import { BerthError } from '../../host/errors';
import { EgressProxy } from '../../host/egress';
import { KeyMask, ModelGateway, storeLedger, usageOf, type GatewayLedger, type GatewayUsage } from '../../host/gateway';
import type { SandboxGatewaySpec } from '../../host/sandbox';
import { startModelServer, type ModelServer } from '../support/model-server';
import { tempStore } from '../support/temp-store';

const KEY = 'sk-unit-0123456789abcdef';
const HEAD = 'kernel: { name: berth, version: 0.1.0, compatible: "^0.1.0" }\nimage: { ref: "berth/tiny:latest" }\n';

function manifestError(text: string): { message: string; paths: string[] } {
  try {
    parseEnvironment(HEAD + text, 'env.yaml');
  } catch (err) {
    expect(err).toBeInstanceOf(BerthError);
    return { message: (err as BerthError).message, paths: ((err as BerthError).details?.issues as Array<{ path: string }>).map((i) => i.path) };
  }
  throw new Error('expected the manifest to be refused');
}

describe('the manifest gateway section', () => {
  const ok = 'network: { mode: allowlist }\ngateway: { provider: { baseUrl: "http://127.0.0.1:9/v1", key: { env: K } }, models: [m] }\n';

  it('parses a gateway on an allowlist network, budget optional', () => {
    const env = parseEnvironment(HEAD + ok, 'env.yaml');
    expect(env.gateway).toEqual({ provider: { baseUrl: 'http://127.0.0.1:9/v1', key: { env: 'K' } }, models: ['m'] });
  });

  it('refuses a gateway without an allowlist network, naming the gateway field', () => {
    const e = manifestError('gateway: { provider: { baseUrl: "http://127.0.0.1:9/v1", key: { env: K } }, models: [m] }\n');
    expect(e.paths).toEqual(['gateway']);
    expect(e.message).toContain('network.mode allowlist');
  });

  it('names each bad gateway field: a URL with credentials, no models, a key source of neither kind, a misspelt budget field (and so its missing one)', () => {
    const e = manifestError('network: { mode: allowlist }\ngateway: { provider: { baseUrl: "http://user:pw@x/v1", key: { vault: K } }, models: [], budget: { token: 5 } }\n');
    expect(e.paths.sort()).toEqual(['gateway.budget.token', 'gateway.budget.tokens', 'gateway.models', 'gateway.provider.baseUrl', 'gateway.provider.key'].sort());
  });
});

describe('usage of an answer', () => {
  it('reads Chat Completions and Responses usage, from JSON and from a stream', () => {
    expect(usageOf(JSON.stringify({ model: 'a', usage: { prompt_tokens: 5, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 1 } } }), 'application/json')).toEqual({ usage: { prompt: 5, completion: 2, cached: 1 }, model: 'a' });
    expect(usageOf(JSON.stringify({ model: 'b', usage: { input_tokens: 7, output_tokens: 3 } }), 'application/json')).toEqual({ usage: { prompt: 7, completion: 3, cached: 0 }, model: 'b' });
    const chat = ['data: {"model":"c","choices":[{"delta":{"content":"x"}}]}', 'data: {"model":"c","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}', 'data: [DONE]'].join('\n\n');
    expect(usageOf(chat, 'text/event-stream')).toEqual({ usage: { prompt: 4, completion: 1, cached: 0 }, model: 'c' });
    const responses = ['event: response.created', 'data: {"type":"response.created","response":{"model":"d"}}', 'event: response.completed', 'data: {"type":"response.completed","response":{"model":"d","usage":{"input_tokens":9,"output_tokens":2,"input_tokens_details":{"cached_tokens":4}}}}'].join('\n');
    expect(usageOf(responses, 'text/event-stream; charset=utf-8')).toEqual({ usage: { prompt: 9, completion: 2, cached: 4 }, model: 'd' });
  });

  it("takes a stream's usage and model from the last event reporting each, however many events come before", () => {
    const deltas = Array.from({ length: 500 }, (_, i) => `data: {"model":"early","choices":[{"delta":{"content":"t${i}"}}],"usage":null}`);
    const stream = [...deltas, 'data: {"model":"m1","usage":{"prompt_tokens":1,"completion_tokens":1}}', 'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":500}}', 'data: [DONE]'].join('\n\n');
    expect(usageOf(stream, 'text/event-stream')).toEqual({ usage: { prompt: 3, completion: 500, cached: 0 }, model: 'm1' });
    expect(usageOf([...deltas, 'data: [DONE]'].join('\n\n'), 'text/event-stream')).toEqual({ usage: undefined, model: 'early' });
  });

  it('reports none for a dropped stream or a body that is not JSON', () => {
    expect(usageOf('data: {"choices":[{"delta":{"content":"x"}}]}\n\n', 'text/event-stream').usage).toBeUndefined();
    expect(usageOf('<html>', 'text/html').usage).toBeUndefined();
  });
});

/** The ledger in memory: what the store-backed one records, for pure assertions. */
function memoryLedger(spent = 0) {
  const entries: Array<{ kind: string; body: Record<string, unknown> }> = [];
  const spends: Array<{ model: string; usage: GatewayUsage | undefined }> = [];
  let tokens = spent;
  const ledger: GatewayLedger = {
    account: async () => ({ runId: 'run_1', spentTokens: tokens }),
    entry: (_r, kind, body) => void entries.push({ kind, body: (typeof body === 'function' ? body() : body) as Record<string, unknown> }),
    spend: (_r, model, usage, estimated) => {
      spends.push({ model, usage });
      tokens += usage ? usage.prompt + usage.completion : (estimated ?? 0);
    },
    settle: async () => {},
  };
  return { ledger, entries, spends };
}

let server: ModelServer | undefined;
let proxy: EgressProxy | undefined;
let gateway: ModelGateway | undefined;
let echo: Server | undefined;
afterEach(async () => {
  await new Promise((r) => (echo ? echo.close(r) : r(undefined)));
  echo = undefined;
  await proxy?.close();
  gateway?.close();
  await server?.close();
  proxy = gateway = server = undefined;
});

/** The gateway served by a real egress proxy on loopback, as a sandbox reaches it. */
async function serve(spec: Partial<SandboxGatewaySpec>, spent = 0, env: Record<string, string> = { GW_KEY: KEY }) {
  server ??= await startModelServer(() => ({ content: 'hi there' }));
  const mem = memoryLedger(spent);
  const g = new ModelGateway({
    spec: { providerBaseUrl: server.url, key: { env: 'GW_KEY' }, models: ['small'], budgetTokens: null, ...spec },
    ledger: mem.ledger,
    log: pino({ level: 'silent' }),
    keySource: { env: (n) => env[n], file: async () => '' },
  });
  gateway = g;
  const attempts: unknown[] = [];
  proxy = new EgressProxy({ allow: [], overrides: [], runId: 'run_1', leaseId: 'lease_1', record: (a) => attempts.push(a), gateway: g });
  const { port } = await proxy.listen('127.0.0.1');
  return { port, ...mem, attempts };
}

function post(port: number, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), authorization: 'Bearer berth-gateway', ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const ask = { model: 'small', messages: [{ role: 'user', content: 'hello' }] };

describe('the model gateway on the egress proxy', () => {
  it('forwards a completion with the provider key in place of the sandbox placeholder and records request, answer and usage', async () => {
    const g = await serve({});
    const r = await post(g.port, '/v1/chat/completions', ask);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).choices[0].message.content).toBe('hi there');
    expect(server!.requests.map((q) => q.authorization)).toEqual([`Bearer ${KEY}`]);
    const u = server!.reported[0]!;
    expect(g.spends).toEqual([{ model: 'small', usage: { prompt: u.prompt_tokens, completion: u.completion_tokens, cached: 0 } }]);
    expect(g.entries.map((e) => e.kind)).toEqual(['gateway.request', 'gateway.response']);
    expect(g.entries[1]!.body).toMatchObject({ model: 'small', status: 200, usage: { prompt: u.prompt_tokens, completion: u.completion_tokens } });
    expect(JSON.stringify(g.entries)).not.toContain(KEY);
    // Gateway requests are not egress: nothing is proxied to the outside.
    expect(g.attempts).toEqual([]);
  });

  it('serves a client that sends the absolute URL of the proxy itself (http_proxy without no_proxy) the same way', async () => {
    const g = await serve({});
    const r = await post(g.port, `http://127.0.0.1:${g.port}/v1/chat/completions`, ask);
    expect(r.status).toBe(200);
    expect(server!.requests).toHaveLength(1);
  });

  it('asks a stream for its usage and counts it', async () => {
    const g = await serve({});
    const r = await post(g.port, '/v1/chat/completions', { ...ask, stream: true });
    expect(r.status).toBe(200);
    expect(r.text).toContain('data: [DONE]');
    expect(server!.requests[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(g.spends[0]!.usage).toMatchObject({ prompt: server!.reported[0]!.prompt_tokens });
  });

  it("records an answer's usage only once the answer has left for the sandbox's client", async () => {
    const g = await serve({});
    const client: Socket = connect(g.port, '127.0.0.1');
    await new Promise((r) => client.once('connect', r));
    // What the client's socket holds when the gateway counts the answer, read from its descriptor
    // at that moment (the event loop cannot deliver it to the socket while the gateway's code runs).
    const fd = (client as unknown as { _handle: { fd: number } })._handle.fd;
    const heldAtSpend: string[] = [];
    const spend = g.ledger.spend;
    g.ledger.spend = (runId, model, usage) => {
      const buf = Buffer.alloc(65536);
      let n = 0;
      try {
        n = readSync(fd, buf);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      }
      heldAtSpend.push(buf.toString('latin1', 0, n));
      spend(runId, model, usage);
    };
    const body = JSON.stringify(ask);
    client.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    await expect.poll(() => g.spends.length).toBe(1);
    client.destroy();
    expect(heldAtSpend).toHaveLength(1);
    expect(heldAtSpend[0]).toMatch(/^HTTP\/1\.1 200 /);
    expect(heldAtSpend[0]).toContain('hi there');
    expect(g.spends[0]!.usage).toMatchObject({ prompt: server!.reported[0]!.prompt_tokens });
  });

  it('refuses a model not in the list and a spent budget with OpenAI-shaped typed errors, never reaching the provider', async () => {
    const g = await serve({ budgetTokens: 50 }, 50);
    const other = await post(g.port, '/v1/chat/completions', { ...ask, model: 'large' });
    expect(other.status).toBe(403);
    expect(JSON.parse(other.text).error).toMatchObject({ code: 'gateway_model_not_allowed', type: 'berth_gateway' });
    const spent = await post(g.port, '/v1/chat/completions', ask);
    expect(spent.status).toBe(429);
    expect(JSON.parse(spent.text).error.code).toBe('gateway_budget_exhausted');
    expect(JSON.parse(spent.text).error.message).toContain('50 of gateway.budget.tokens 50');
    expect(server!.requests).toEqual([]);
    expect(g.entries.map((e) => [e.kind, e.body.code])).toEqual([
      ['gateway.refused', 'gateway_model_not_allowed'],
      ['gateway.refused', 'gateway_budget_exhausted'],
    ]);
  });

  it('answers 502 naming the variable, not a value, when the host has no key', async () => {
    const g = await serve({}, 0, {});
    const r = await post(g.port, '/v1/chat/completions', ask);
    expect(r.status).toBe(502);
    expect(JSON.parse(r.text).error).toMatchObject({ code: 'gateway_key_unavailable' });
    expect(JSON.parse(r.text).error.message).toContain('GW_KEY');
    expect(server!.requests).toEqual([]);
    expect(g.entries.map((e) => e.kind)).toEqual(['gateway.refused']);
  });

  it('refuses paths that could reach another part of the provider with its key', async () => {
    const g = await serve({});
    for (const path of ['/v1/../admin', '/v1/%2e%2e/admin', '/admin', '/v1//chat']) {
      const r = await post(g.port, path, ask);
      expect([path, r.status, JSON.parse(r.text).error.code]).toEqual([path, 404, 'gateway_unsupported']);
    }
    expect(server!.requests).toEqual([]);
  });

  it("never hands the sandbox the provider key when the provider echoes it back, in an error's body, a header or a stream, while the answer's length stays true", async () => {
    // A provider (or a proxy before it) that quotes the credential it was given, as some do in a 401.
    echo = createServer((req, res) => {
      const auth = req.headers.authorization ?? '';
      req.resume();
      req.on('end', () => {
        if (req.url!.endsWith('/chat/completions')) {
          const body = JSON.stringify({ error: { message: `Incorrect API key provided: ${auth.slice(7)} (${Buffer.from(auth.slice(7)).toString('base64')})`, type: 'invalid_request_error', code: 'invalid_api_key' } });
          res.writeHead(401, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-echo': auth });
          return void res.end(body);
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: {"delta":"${auth.slice(0, 15)}`);
        setImmediate(() => res.end(`${auth.slice(15)}"}\n\ndata: [DONE]\n\n`));
      });
    });
    await new Promise<void>((r) => echo!.listen(0, '127.0.0.1', r));
    const g = await serve({ providerBaseUrl: `http://127.0.0.1:${(echo.address() as AddressInfo).port}/v1` });
    const answers: Array<{ status: number; headers: Record<string, unknown>; text: string }> = [];
    for (const path of ['/v1/chat/completions', '/v1/responses']) {
      answers.push(
        await new Promise((resolve, reject) => {
          const data = JSON.stringify({ ...ask, stream: path === '/v1/responses' });
          const req = request({ host: '127.0.0.1', port: g.port, method: 'POST', path, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (d: string) => (text += d));
            // Node's client checks the body against content-length: a masked answer of another length fails here.
            res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
            res.on('error', reject);
          });
          req.on('error', reject);
          req.end(data);
        }),
      );
    }
    expect(answers[0]!.status).toBe(401);
    expect(JSON.parse(answers[0]!.text).error.code).toBe('invalid_api_key');
    expect(answers[0]!.text).toContain('Incorrect API key provided: ');
    expect(answers[1]!.text).toContain('data: [DONE]');
    const seen = JSON.stringify(answers);
    expect(seen).not.toContain(KEY);
    expect(seen).not.toContain(Buffer.from(KEY).toString('base64').slice(0, 24));
    expect(JSON.stringify(g.entries)).not.toContain(KEY);
  });

  it("counts an answer its client cut off before the usage came against the budget, estimated from its bytes, so the next request past the budget is refused", async () => {
    // A stream that never reports usage: a sandbox that stops reading before the last event (or a
    // provider that cuts it) made the provider generate tokens the budget never saw.
    echo = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        if (!JSON.parse(body).stream) {
          const answer = JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'ok' } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
          return void res.end(answer);
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'x'.repeat(400) } }] })}\n\n`);
        // ...and the rest never comes: the answer ends when its client goes.
      });
    });
    await new Promise<void>((r) => echo!.listen(0, '127.0.0.1', r));
    const g = await serve({ providerBaseUrl: `http://127.0.0.1:${(echo.address() as AddressInfo).port}/v1`, budgetTokens: 50 });
    await new Promise<void>((resolve, reject) => {
      const data = JSON.stringify({ ...ask, stream: true });
      const req = request({ host: '127.0.0.1', port: g.port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
      req.end(data);
    });
    const end = Date.now() + 10_000;
    while (!g.entries.some((e) => e.kind === 'gateway.response')) {
      if (Date.now() > end) throw new Error('the cut answer was never recorded');
      await new Promise((r) => setTimeout(r, 10));
    }
    const next = await post(g.port, '/v1/chat/completions', ask);
    expect(next.status).toBe(429);
    expect(JSON.parse(next.text).error.code).toBe('gateway_budget_exhausted');
    const cut = g.entries.find((e) => e.kind === 'gateway.response')!.body;
    expect(cut).toMatchObject({ usage: null });
    expect(cut.estimatedTokens as number).toBeGreaterThanOrEqual(100);
  });

  it("keeps an estimated answer's tokens in the run's budget across a host restart, read back from the store", async () => {
    const t = tempStore();
    try {
      const created = await t.store.commit({ sessionId: 'ses_gw', label: 'submit', createSession: {}, runs: [{ id: 'run_gw', kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
      expect(created.ok).toBe(true);
      const runOf = async () => ({ id: 'run_gw', sessionId: 'ses_gw' });
      const first = storeLedger(t.store, runOf, pino({ level: 'silent' }));
      expect((await first.account()).spentTokens).toBe(0);
      first.spend('run_gw', 'small', undefined, 120);
      first.entry('run_gw', 'gateway.response', { usage: null, estimatedTokens: 120 });
      first.spend('run_gw', 'small', { prompt: 3, completion: 4, cached: 0 });
      first.entry('run_gw', 'gateway.response', { usage: { prompt: 3, completion: 4, cached: 0 } });
      expect((await first.account()).spentTokens).toBe(127);
      await first.settle();
      // Another host (or this one restarted) reads the run's spending back from its entries.
      expect((await storeLedger(t.store, runOf, pino({ level: 'silent' })).account()).spentTokens).toBe(127);
    } finally {
      await t.cleanup();
    }
  });

  it('masks every spelling of the key in an answer split anywhere, same length, holding back only what may begin one', () => {
    const text = `before ${KEY} middle ${Buffer.from(KEY).toString('base64')} after s`;
    for (let a = 0; a <= text.length; a++) {
      for (const b of [a, Math.min(text.length, a + 3), Math.min(text.length, a + 17)]) {
        const m = new KeyMask(KEY);
        const out = Buffer.concat([m.push(Buffer.from(text.slice(0, a))), m.push(Buffer.from(text.slice(a, b))), m.push(Buffer.from(text.slice(b))), m.end()]).toString();
        expect(out.length, `${a}/${b}`).toBe(text.length);
        expect(out, `${a}/${b}`).not.toContain(KEY);
        expect(out.startsWith('before ') && out.includes(' middle ') && out.endsWith(' after s'), out).toBe(true);
      }
    }
    // Nothing that could begin the key is held back, so a stream's events pass as they come.
    expect(new KeyMask(KEY).push(Buffer.from('data: {"x":1}\n\n')).toString()).toBe('data: {"x":1}\n\n');
  });

  it('lists only the allowed models', async () => {
    const g = await serve({ models: ['small', 'tiny'] });
    const text = await new Promise<string>((resolve) => request({ host: '127.0.0.1', port: g.port, path: '/v1/models' }, (res) => { let t = ''; res.on('data', (d) => (t += d)); res.on('end', () => resolve(t)); }).end());
    expect(JSON.parse(text).data.map((m: { id: string }) => m.id)).toEqual(['small', 'tiny']);
  });
});

describe('an egress proxy without a gateway', () => {
  it('still refuses origin-form requests', async () => {
    const attempts: unknown[] = [];
    proxy = new EgressProxy({ allow: [], overrides: [], runId: null, leaseId: null, record: (a) => attempts.push(a) });
    const { port } = (await proxy.listen('127.0.0.1')) as AddressInfo;
    const r = await post(port, '/v1/chat/completions', ask);
    expect(r.status).toBe(400);
    expect(attempts).toHaveLength(1);
  });
});
