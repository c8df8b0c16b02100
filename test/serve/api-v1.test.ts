import SwaggerParser from '@apidevtools/swagger-parser';
import { getEventListeners } from 'node:events';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Berth, BerthError, type RunEvent } from '../../host/index';
import { ROUTES } from '../../host/serve/api-v1-schema';
import { ENTRY, type ApprovalRequestedEntry, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { startWorker, stepRunning, stopWorker, waitFor, type WorkerProcess } from '../support/fleet';
import { planFixture } from '../support/plan-fixture';
import { startServeChild } from '../support/serve-browser';

// `berth serve`'s versioned API (/api/v1) driven by the remote client `Berth.connect`, against a
// real server child, a real worker child, a real store and engine.

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

const tokenOf = (login: string) => new URL(login).searchParams.get('token')!;
const errorOf = async (p: Promise<unknown>) => p.then(() => { throw new Error('expected a refusal'); }, (err: unknown) => err);

describe('the versioned HTTP API and its remote client', { timeout: 300_000 }, () => {
  it('a remote client submits a plan, follows its commits through SSE to the end across a server restart without losing or doubling one, and gets typed errors for a bad token, an unknown run and a refused action', async () => {
    const fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'slow', run: 'sleep 5 && echo slow >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    cleanups.push(() => fx.cleanup());
    // The worker creates the store; the server shows an existing one.
    const worker: WorkerProcess = await startWorker(fx, 5000);
    cleanups.push(async () => void (await stopWorker(worker)));
    await waitFor('the worker to create the store', async () => (existsSync(fx.store) ? true : undefined));
    let server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const port = new URL(server.url).port;

    const remote = Berth.connect({ url: server.url, token: tokenOf(server.login!), reconnectMs: 200 });
    const { run, created } = await remote.submitPlan(fx.plan, { requestId: 'remote-1' });
    expect(created).toBe(true);
    expect((await remote.submitPlan(fx.plan, { requestId: 'remote-1' })).run.id).toBe(run.id);

    // One signal for a whole follow and wait, as a long-lived client passes: each pause between
    // polls and reconnects used to leave its abort listener on it, one more per poll.
    const follow = new AbortController();
    const waiting = remote.wait(run.id, { signal: follow.signal, pollMs: 20 });
    const seen: RunEvent[] = [];
    let restarted = false;
    for await (const e of remote.events(run.id, { signal: follow.signal })) {
      seen.push(e);
      if (!restarted && (await stepRunning(fx, run.id, 1))) {
        // The server goes away while the run goes on; the client reconnects with Last-Event-ID.
        restarted = true;
        await server.stop();
        server = await startServeChild(fx.store, fx.hostId, ['--port', port]);
      }
    }
    expect(restarted).toBe(true);
    const end = await waiting;
    expect(end.state).toBe('completed');
    expect(getEventListeners(follow.signal, 'abort')).toHaveLength(0);
    expect(seen.at(-1)!.state).toBe('completed');
    const logged = await fx.read((s) => s.listCommitLog({ sessionId: run.sessionId }));
    expect(seen.map((e) => e.seq)).toEqual(logged.map((c) => c.seq));

    const wrong = Berth.connect({ url: server.url, token: 'not-the-token' });
    expect(await errorOf(wrong.get(run.id))).toMatchObject({ code: 'unauthorized', retryable: false });
    const unknown = await errorOf(remote.get('run_nope'));
    expect(unknown).toBeInstanceOf(BerthError);
    expect(unknown).toMatchObject({ code: 'run_not_found' });
    expect(await errorOf(remote.cancel(run.id))).toMatchObject({ code: 'run_not_cancellable' });
    expect((await remote.list({ states: ['completed'] })).map((r) => r.id)).toEqual([run.id]);
  });

  it('a remote client approves one tool call waiting for approval and denies another: the approved one runs once, the denied one never, both with the server\'s operator as actor', async () => {
    const w: AgentWorld = await agentWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo approved-ran >> /tmp/a.log; cat /tmp/a.log' } }, { name: 'exec', arguments: { command: 'echo denied-ran >> /tmp/b.log; cat /tmp/b.log' } }] },
      { content: 'finished' },
    ]);
    cleanups.push(() => w.cleanup());
    const { run } = await w.start('two calls, decided remotely', { settings: { requireApproval: ['exec'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    const server = await startServeChild(w.storePath, w.hostId);
    cleanups.push(() => server.stop());
    const remote = Berth.connect({ url: server.url, token: tokenOf(server.login!) });
    const asked = await waitFor('both approvals to be asked', async () => {
      const e = (await w.rt.store.listEntries(run.sessionId)).filter((x) => x.kind === ENTRY.approvalRequested).map((x) => x.body as unknown as ApprovalRequestedEntry);
      return e.length === 2 ? e : undefined;
    });
    expect((await remote.approve(run.id, asked[0]!.toolCallId, { digest: asked[0]!.digest })).said).toContain('approved');
    expect((await remote.deny(run.id, asked[1]!.approvalId)).said).toContain('denied');
    // Deciding again is refused with the server's typed error.
    expect(await errorOf(remote.deny(run.id, asked[0]!.approvalId))).toBeInstanceOf(BerthError);
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const results = (await w.rt.store.listEntries(run.sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
    expect(results.map((r) => r.status).sort()).toEqual(['denied', 'ok']);
    expect(results.find((r) => r.status === 'ok')!.content.match(/^approved-ran$/gm)).toHaveLength(1);
    expect(results.map((r) => r.content).join('\n')).not.toContain('denied-ran');
    const decided = (await w.rt.store.listEntries(run.sessionId)).filter((x) => x.kind === ENTRY.approvalDecided).map((x) => x.body as { by?: string });
    expect(decided.map((d) => d.by)).toEqual(['user:web-tester', 'user:web-tester']);
  });

  it('serves an OpenAPI 3.1 document that validates and lists exactly the routes the server answers', async () => {
    const fx = await planFixture([{ name: 'one', run: 'true' }]);
    cleanups.push(() => fx.cleanup());
    expect((await fx.cli(['run', fx.plan])).code).toBe(0);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const auth = { authorization: `Bearer ${tokenOf(server.login!)}` };
    const doc = (await (await fetch(`${server.url}/api/v1/openapi.json`, { headers: auth })).json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toBe('3.1.0');
    // Validated by an independent OpenAPI 3.1 validator from npm (it throws naming what is wrong); it dereferences in place, so it gets a copy.
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
    // And it is no validator that passes anything: a document with a broken operation is refused.
    await expect(SwaggerParser.validate({ ...structuredClone(doc), paths: { '/x': { get: { responses: 'none' } } } } as never)).rejects.toThrow();
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)).sort();
    expect(documented).toEqual(ROUTES.map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`).sort());
    // Every documented route answers as the API does (JSON, or an event stream), never the router's own 404.
    for (const entry of documented) {
      const [method, path] = entry.split(' ') as [string, string];
      const res = await fetch(`${server.url}${path.replace('{id}', 'run_nope')}`, { method: method.toUpperCase(), headers: { ...auth, 'content-type': 'application/json' }, body: method === 'post' ? '{}' : undefined });
      const type = res.headers.get('content-type') ?? '';
      expect(type, `${entry}: ${res.status}`).toMatch(/application\/json|text\/event-stream/);
      if (type.startsWith('application/json') && !res.ok) expect(((await res.json()) as { error: { code: string } }).error.code, entry).not.toBe('not_found');
      else await res.body?.cancel();
    }
    // A route the document does not list is the router's 404, typed as every error under /api is.
    const missing = await fetch(`${server.url}/api/v1/nothing-here`, { headers: auth });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'not_found', message: 'no route GET /api/v1/nothing-here' } });
  });
});
