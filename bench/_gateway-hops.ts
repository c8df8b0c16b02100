/**
 * `npx tsx bench/_gateway-hops.ts`: the floor of a forwarding hop written in Node, by layer, against
 * the same scripted server and `openai` client as bench/gateway.ts (interleaved rounds):
 *   http   Node http server + http client with a kept-alive agent (the bench's bare pass-through)
 *   rawup  Node http server, upstream over one kept-alive net socket written and parsed by hand
 *   raw    net server and net upstream, both by hand: no HTTP machinery at all (content-length only)
 * Not a gateway (no checks, no record): it says what any hop costs before the gateway does anything.
 * `npx tsx bench/_gateway-hops.ts ROUNDS BASE_DIR` adds `base`: the gateway of another tree (an export
 * of main, say), its proxy given the gateway as that tree's API takes it, interleaved with the rest.
 */
import { Agent, createServer, request } from 'node:http';
import { connect, createServer as netServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import pino from 'pino';
import { EgressProxy } from '../host/egress';
import { ModelGateway, type GatewayLedger } from '../host/gateway';
import { startModelServer } from '../test/support/model-server';
import { median } from './_stats';

const server = await startModelServer(() => ({ content: 'hello from the provider' }));
const up = new URL(server.url);

/** One kept-alive upstream socket, requests one at a time; answers parsed for content-length only. */
function rawUpstream() {
  let sock: Socket | null = null;
  let buf: Buffer = Buffer.alloc(0);
  let waiting: ((head: Buffer, body: Buffer) => void) | null = null;
  const pump = () => {
    if (!waiting) return;
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const headText = buf.toString('latin1', 0, end + 4);
    const m = /content-length: *(\d+)/i.exec(headText);
    let body: Buffer;
    if (m) {
      const len = Number(m[1]);
      if (buf.length < end + 4 + len) return;
      body = buf.subarray(end + 4, end + 4 + len);
      buf = buf.subarray(end + 4 + len);
    } else {
      // chunked: whole chunks until the last (0) one
      const parts: Buffer[] = [];
      let at = end + 4;
      for (;;) {
        const eol = buf.indexOf('\r\n', at);
        if (eol < 0) return;
        const n = parseInt(buf.toString('latin1', at, eol), 16);
        if (buf.length < eol + 2 + n + 2) return;
        if (n === 0) {
          at = eol + 4;
          break;
        }
        parts.push(buf.subarray(eol + 2, eol + 2 + n));
        at = eol + 2 + n + 2;
      }
      body = Buffer.concat(parts);
      buf = buf.subarray(at);
    }
    const head = Buffer.from(headText.replace(/transfer-encoding: *chunked\r\n/i, `content-length: ${body.length}\r\n`), 'latin1');
    const w = waiting;
    waiting = null;
    w(head, body);
  };
  const socket = () => {
    if (sock && !sock.destroyed) return sock;
    sock = connect(Number(up.port), up.hostname);
    sock.setNoDelay(true);
    sock.on('data', (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      pump();
    });
    return sock;
  };
  return (path: string, body: Buffer) =>
    new Promise<{ head: Buffer; body: Buffer }>((resolve) => {
      waiting = (head, b) => resolve({ head, body: b });
      socket().write(Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nhost: ${up.host}\r\ncontent-type: application/json\r\nauthorization: Bearer sk-x\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n`, 'latin1'), body]));
    });
}

async function listen(s: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown }) {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/v1`;
}

const agent = new Agent({ keepAlive: true });
const httpHop = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const out = request({ host: up.hostname, port: up.port, method: 'POST', path: `${up.pathname}${req.url!.slice(3)}`, headers: { 'content-type': 'application/json', 'content-length': String(body.length), authorization: 'Bearer sk-x' }, agent }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    out.end(body);
  });
});
const httpBufHop = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const out = request({ host: up.hostname, port: up.port, method: 'POST', path: `${up.pathname}${req.url!.slice(3)}`, headers: { 'content-type': 'application/json', 'content-length': String(body.length), authorization: 'Bearer sk-x' }, agent }, (ur) => {
      const got: Buffer[] = [];
      ur.on('data', (d: Buffer) => got.push(d));
      ur.on('end', () => {
        const b = Buffer.concat(got);
        res.writeHead(ur.statusCode ?? 502, { 'content-type': ur.headers['content-type'] ?? 'application/json', 'content-length': String(b.length) }).end(b);
      });
    });
    out.end(body);
  });
});
const upA = rawUpstream();
const rawUpHop = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', async () => {
    const a = await upA(`${up.pathname}${req.url!.slice(3)}`, Buffer.concat(chunks));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(a.body.length) }).end(a.body);
  });
});
const upB = rawUpstream();
const rawHop = netServer((c) => {
  c.setNoDelay(true);
  let buf: Buffer = Buffer.alloc(0);
  c.on('data', async (d: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = buf.subarray(0, end).toString('latin1');
    const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (buf.length < end + 4 + len) return;
    const body = buf.subarray(end + 4, end + 4 + len);
    buf = buf.subarray(end + 4 + len);
    const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' ', head.indexOf(' ') + 1));
    JSON.parse(body.toString('utf8'));
    const a = await upB(`${up.pathname}${path.slice(3)}`, body);
    c.write(Buffer.concat([a.head, a.body]));
  });
});
// The gateway itself, with an in-memory ledger (bench/gateway.ts measures it with the store's).
const ledger: GatewayLedger = { account: async () => ({ runId: 'run_x', spentTokens: 0 }), entry: () => {}, spend: () => {}, settle: async () => {} };
process.env.HOPS_KEY = 'sk-x';
const gateway = new ModelGateway({ spec: { providerBaseUrl: server.url, key: { env: 'HOPS_KEY' }, models: ['m'], budgetTokens: null }, ledger, log: pino({ level: 'silent' }) });
const proxy = new EgressProxy({ allow: [], overrides: [], runId: 'run_x', leaseId: null, record: () => {}, gateway });
const gw = `http://127.0.0.1:${(await proxy.listen('127.0.0.1')).port}/v1`;
const baseDir = process.argv[3];
let base: string | undefined;
if (baseDir) {
  const be = (await import(`${baseDir}/host/egress/index.ts`)) as { EgressProxy: new (o: object) => { listen(h: string): Promise<AddressInfo> } };
  const bg = (await import(`${baseDir}/host/gateway/index.ts`)) as { ModelGateway: new (o: object) => { handle(...a: unknown[]): void } };
  const g2 = new bg.ModelGateway({ spec: { providerBaseUrl: server.url, key: { env: 'HOPS_KEY' }, models: ['m'], budgetTokens: null }, ledger, log: pino({ level: 'silent' }) });
  // main's proxy takes the gateway as a function; a tree with this one's API takes the object.
  const p2 = new be.EgressProxy({ allow: [], overrides: [], runId: 'run_x', leaseId: null, record: () => {}, gateway: Object.assign((...a: unknown[]) => g2.handle(...a), { handle: (...a: unknown[]) => g2.handle(...a), serve: (g2 as unknown as { serve: (...a: unknown[]) => void }).serve?.bind(g2) }) });
  base = `http://127.0.0.1:${(await p2.listen('127.0.0.1')).port}/v1`;
}
const urls = { gateway: gw, ...(base ? { base } : {}), http: await listen(httpHop), httpbuf: await listen(httpBufHop), rawup: await listen(rawUpHop), raw: await listen(rawHop) };
const clients = { direct: new OpenAI({ baseURL: server.url, apiKey: 'k', maxRetries: 0 }), ...Object.fromEntries(Object.entries(urls).map(([k, u]) => [k, new OpenAI({ baseURL: u, apiKey: 'k', maxRetries: 0 })])) } as Record<string, OpenAI>;
// BENCH_HOPS_CPU=1: CPU time (user + system) of the process per completion instead of wall time; on a loaded machine it shows the work each layer does, not the wait for a core.
const cpu = process.env.BENCH_HOPS_CPU === '1';
const one = async (c: OpenAI) => {
  const t = performance.now();
  const u = process.cpuUsage();
  const a = await c.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'say hello' }] });
  if (a.choices[0]?.message.content !== 'hello from the provider') throw new Error('bad answer');
  if (cpu) {
    const d = process.cpuUsage(u);
    return (d.user + d.system) / 1000;
  }
  return performance.now() - t;
};
for (let i = 0; i < 20; i++) for (const c of Object.values(clients)) await one(c);
const ratios: Record<string, number[]> = {};
const abs: Record<string, number[]> = {};
for (let r = 0; r < Number(process.argv[2] ?? 15); r++) {
  const per: Record<string, number[]> = {};
  for (let i = 0; i < 20; i++) for (const [k, c] of Object.entries(clients)) (per[k] ??= []).push(await one(c));
  for (const k of Object.keys(per)) {
    (ratios[k] ??= []).push(median(per[k]!) / median(per.direct!));
    (abs[k] ??= []).push(...per[k]!);
  }
}
for (const k of Object.keys(ratios)) console.log(`${k.padEnd(7)} ${median(abs[k]!).toFixed(3)} ms  ${median(ratios[k]!).toFixed(2)}x`);
process.exit(0);
