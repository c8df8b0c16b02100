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
 * Each party runs where it runs in real use: the client in a process of its own (the sandbox's
 * agent), the gateway in the bench's (the host's), the provider in a third (bench/_gateway-party.ts).
 * `BENCH_GATEWAY_PLACEMENT=one-process` runs all three in the bench's process, as up to session 11:
 * there every party's work queues on one thread, so the gateway's bookkeeping after an answer is
 * on the client's path, which it is not in real use.
 */
import { fork, type ChildProcess } from 'node:child_process';
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
const ONE_PROCESS = process.env.BENCH_GATEWAY_PLACEMENT === 'one-process';
const WARM = 10;

/** A party in its own process (bench/_gateway-party.ts), and its first message. */
function party(role: 'provider' | 'client'): Promise<{ child: ChildProcess; first: Record<string, unknown> }> {
  const child = fork(new URL('./_gateway-party.ts', import.meta.url).pathname, [role], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (first) => resolve({ child, first: first as Record<string, unknown> }));
    child.once('exit', (code) => reject(new Error(`bench: the ${role} process exited (${code})`)));
  });
}

/** times[round][target][i] of `targets`, called in turn by the client in its own process. */
async function remoteTimes(targets: Array<{ url: string; key: string }>): Promise<number[][][]> {
  const { child } = await party('client');
  const answer = new Promise<number[][][]>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { times: number[][][] }).times));
    child.once('exit', (code) => reject(new Error(`bench: the client process exited (${code})`)));
  });
  child.send({ targets, rounds: ROUNDS, perRound: PER_ROUND, warm: WARM });
  return answer;
}

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
  const provider = ONE_PROCESS ? undefined : await party('provider');
  const local = ONE_PROCESS ? await startModelServer(() => ({ content: 'hello from the provider' })) : undefined;
  const providerUrl = local?.url ?? (provider!.first.url as string);
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
  const gateway = new ModelGateway({ spec: { providerBaseUrl: providerUrl, key: { env: 'BENCH_GATEWAY_KEY' }, models: [MODEL], budgetTokens: null }, ledger, log });
  const proxy = new EgressProxy({ allow: [], overrides: [], runId, leaseId: null, record: () => {}, gateway });
  const { port } = await proxy.listen('127.0.0.1');
  const bare = await passThrough(providerUrl);
  // In turn: direct, through the gateway, through the bare hop.
  const targets = [
    { url: providerUrl, key: 'sk-bench-gateway-key' },
    { url: `http://127.0.0.1:${port}/v1`, key: 'berth-gateway' },
    { url: bare.url, key: 'berth-gateway' },
  ];
  try {
    const times = ONE_PROCESS ? await localTimes(targets) : await remoteTimes(targets);
    const ratios: number[] = [];
    const floors: number[] = [];
    const overFloor: number[] = [];
    const d: number[] = [];
    const p: number[] = [];
    for (const [rd, rp, rh] of times as Array<[number[], number[], number[]]>) {
      d.push(...rd);
      p.push(...rp);
      ratios.push(median(rp) / median(rd));
      floors.push(median(rh) / median(rd));
      overFloor.push(median(rp) / median(rh));
    }
    await ledger.settle();
    const recorded = (await store.listEntries(sessionId, { runId })).filter((e) => e.kind === 'gateway.response').length;
    const expected = WARM + ROUNDS * PER_ROUND;
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
    await local?.close();
    provider?.child.send({ stop: true });
    rmSync(dir, { recursive: true, force: true });
  }
};

/** The same calls as the client process makes, from the bench's own process (BENCH_GATEWAY_PLACEMENT=one-process). */
async function localTimes(targets: Array<{ url: string; key: string }>): Promise<number[][][]> {
  const clients = targets.map((t) => new OpenAI({ baseURL: t.url, apiKey: t.key, maxRetries: 0 }));
  const messages = [{ role: 'user' as const, content: 'say hello' }];
  const one = async (c: OpenAI): Promise<number> => {
    const t0 = performance.now();
    const a = await c.chat.completions.create({ model: MODEL, messages });
    if (a.choices[0]?.message.content !== 'hello from the provider') throw new Error('bench: unexpected answer');
    return performance.now() - t0;
  };
  for (let i = 0; i < WARM; i++) for (const c of clients) await one(c); // warm-up: connections, JIT
  const times: number[][][] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const round = clients.map(() => [] as number[]);
    for (let i = 0; i < PER_ROUND; i++) for (const [k, c] of clients.entries()) round[k]!.push(await one(c));
    times.push(round);
  }
  return times;
}
export default suite;
