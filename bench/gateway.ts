/**
 * `npm run bench -- gateway`: what the model gateway adds to a completion.
 *   gateway.direct_ms                       p50, the `openai` client to the scripted OpenAI-compatible server on loopback
 *   gateway.proxied_ms                      p50, the same client through the gateway (an egress proxy with the model gateway on
 *                                           loopback, forwarding with the provider key; request, answer and usage recorded on a
 *                                           run in a real SQLite store, as the host does)
 *   gateway.proxied_completion_vs_direct    median of per-round ratios (goal in issue 30: <= 1.1x)
 *   gateway.passthrough_vs_direct           the floor of any forwarding hop: the same client through a bare Node
 *                                           HTTP pass-through on loopback (reads the body, forwards it over a kept-alive
 *                                           connection, pipes the answer back; no checks, no key, no record)
 *   gateway.proxied_vs_passthrough          what the gateway costs beyond that bare hop
 * Rounds interleave the two paths, so each round sees the same machine load. The scripted server
 * answers at once, so the ratio is the gateway's cost against a provider with no thinking time at all.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import pino from 'pino';
import { EgressProxy } from '../host/egress';
import { ModelGateway, storeLedger } from '../host/gateway';
import { openStore } from '../host/store';
import { newId } from '../host/support/ids';
import { startModelServer } from '../test/support/model-server';
import type { Suite } from './run';
import { median } from './_stats';

const ROUNDS = Number(process.env.BENCH_GATEWAY_ROUNDS ?? 15);
const PER_ROUND = 20;
const MODEL = 'scripted-small';

/** The least a forwarding hop does: read the request, send it on over a kept-alive connection, pipe the answer back. */
async function passThrough(target: string): Promise<{ url: string; close(): void }> {
  const up = new URL(target);
  const agent = new Agent({ keepAlive: true });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = { 'content-type': 'application/json', 'content-length': String(body.length), authorization: 'Bearer sk-bench-gateway-key' };
      const out = request({ host: up.hostname, port: up.port, method: 'POST', path: `${up.pathname}${req.url!.slice('/v1'.length)}`, headers, agent }, (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      });
      out.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () => {
      server.closeAllConnections();
      server.close();
      agent.destroy();
    },
  };
}

const suite: Suite = async (report) => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-gateway-'));
  const server = await startModelServer(() => ({ content: 'hello from the provider' }));
  const store = await openStore(join(dir, 'berth.db'));
  const sessionId = newId('ses');
  const runId = newId('run');
  const taskId = newId('task');
  const r = await store.commit({
    sessionId,
    label: 'submit',
    createSession: { meta: { name: 'bench-gateway' } },
    runs: [{ id: runId, kind: 'plan', submissionId: null, rootTaskId: taskId, versions: {}, forkedFromRunId: null }],
    tasks: [{ id: taskId, runId, parentId: null, kind: 'bench', kindVersion: 1, phase: 'start', input: {} }],
  });
  if (!r.ok) throw new Error(`bench setup commit refused: ${r.conflict.kind}`);
  const log = pino({ level: 'silent' });
  const ledger = storeLedger(store, async () => ({ id: runId, sessionId }), log);
  process.env.BENCH_GATEWAY_KEY = 'sk-bench-gateway-key';
  const gateway = new ModelGateway({ spec: { providerBaseUrl: server.url, key: { env: 'BENCH_GATEWAY_KEY' }, models: [MODEL], budgetTokens: null }, ledger, log });
  const proxy = new EgressProxy({ allow: [], overrides: [], runId, leaseId: null, record: () => {}, gateway });
  const { port } = await proxy.listen('127.0.0.1');
  const direct = new OpenAI({ baseURL: server.url, apiKey: 'sk-bench-gateway-key', maxRetries: 0 });
  const proxied = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'berth-gateway', maxRetries: 0 });
  const bare = await passThrough(server.url);
  const hop = new OpenAI({ baseURL: bare.url, apiKey: 'berth-gateway', maxRetries: 0 });
  const messages = [{ role: 'user' as const, content: 'say hello' }];
  const one = async (c: OpenAI): Promise<number> => {
    const t0 = performance.now();
    const a = await c.chat.completions.create({ model: MODEL, messages });
    if (a.choices[0]?.message.content !== 'hello from the provider') throw new Error('bench: unexpected answer');
    return performance.now() - t0;
  };
  try {
    for (let i = 0; i < 10; i++) await one(direct), await one(proxied), await one(hop); // warm-up: connections, JIT
    const ratios: number[] = [];
    const floors: number[] = [];
    const overFloor: number[] = [];
    const d: number[] = [];
    const p: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const rd: number[] = [];
      const rp: number[] = [];
      const rh: number[] = [];
      for (let i = 0; i < PER_ROUND; i++) {
        rd.push(await one(direct));
        rp.push(await one(proxied));
        rh.push(await one(hop));
      }
      d.push(...rd);
      p.push(...rp);
      ratios.push(median(rp) / median(rd));
      floors.push(median(rh) / median(rd));
      overFloor.push(median(rp) / median(rh));
    }
    await ledger.settle();
    const recorded = (await store.listEntries(sessionId, { runId })).filter((e) => e.kind === 'gateway.response').length;
    const expected = 10 + ROUNDS * PER_ROUND;
    if (recorded !== expected) throw new Error(`bench: ${recorded} gateway answers recorded, ${expected} made`);
    report('direct_ms', median(d), 'absolute');
    report('proxied_ms', median(p), 'absolute');
    report('proxied_completion_vs_direct', median(ratios), 'ratio');
    report('passthrough_vs_direct', median(floors), 'ratio');
    report('proxied_vs_passthrough', median(overFloor), 'ratio');
  } finally {
    bare.close();
    await proxy.close();
    gateway.close();
    await ledger.settle();
    await store.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
};
export default suite;
