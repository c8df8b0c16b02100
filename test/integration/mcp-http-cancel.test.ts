import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { containerStdout } from '../support/agent-observe';
import { mcpWorldPerTest } from '../support/mcp-world';
import { readStore } from '../support/temp-store';

const newWorld = mcpWorldPerTest();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ok: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

describe('berth mcp --http when its client cancels a call (notifications/cancelled in a POST of its own)', { timeout: 120_000 }, () => {
  it("stops the named in-flight exec and its process in the sandbox; another caller's cancel of the same request id, and a cancel of an unknown request, reach nothing and are answered 202", async () => {
    const w = await newWorld({ network: 'none' });
    // Progress every 100 ms: the JSON-only client below asks for it, and must get its one JSON body regardless.
    const server = await w.startHttp(w.envArgs(), { BERTH_MCP_PROGRESS_MS: '100' });
    const client = await w.connectHttp(server.url, server.token());
    const first = (await client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (first.structuredContent as { session: string }).session;
    const stop = new AbortController();
    const asked = client.callTool({ name: 'exec', arguments: { command: 'sleep 30', safe: true, call_id: 'http-cancel-1' } }, undefined, { signal: stop.signal, timeout: 60_000 }).then(() => 'answered', () => 'cancelled');
    let run: string | undefined;
    await until('the exec to be executing', async () => {
      for (const r of await readStore(w.store, (s) => s.listRuns({ sessionId: session }))) {
        if ((await readStore(w.store, (s) => s.listEffects({ runId: r.id }))).some((e) => e.status === 'executing')) run = r.id;
      }
      return run !== undefined;
    }, 60_000);
    const [box] = await w.docker.listContainers({ filters: { label: [`berth.session=${session}`] } });
    // The effect is marked executing before the command is asked of the engine: its process comes a moment later.
    await until('the exec\'s process to run', async () => (await containerStdout(w.docker, box!.Id, ['ps'])).includes('sleep 30'), 60_000);

    // Another caller (its own Mcp-Session-Id, or none) cancelling every request id this client may have used: nothing stops.
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token()}` };
    const hello = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'other', version: '1' } } }) });
    const other = hello.headers.get('mcp-session-id');
    expect(other, 'initialize answers with an Mcp-Session-Id').toMatch(/^[\x21-\x7e]{16,}$/);
    const callers: Array<Record<string, string>> = [{ 'mcp-session-id': other! }, {}];
    for (const caller of callers) {
      const cancels = Array.from({ length: 10 }, (_, id) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'not mine' } }));
      const res = await fetch(server.url, { method: 'POST', headers: { ...headers, ...caller }, body: JSON.stringify(cancels) });
      expect(res.status).toBe(202);
    }
    await sleep(1_000);
    expect((await readStore(w.store, (s) => s.getRun(run!)))?.state).toBe('running');

    // The client's own cancel (the SDK client POSTs it with its Mcp-Session-Id) stops the call.
    stop.abort('the user gave up');
    expect(await asked).toBe('cancelled');
    // Before: the cancel reached a new server that knew no such request; the call slept its 30 s and
    // its run ended `completed`. Judged by how the run ended, not by a clock (load only delays it).
    const ended = async () => (await readStore(w.store, (s) => s.getRun(run!)))?.state;
    await until('the run to end', async () => ['cancelled', 'completed', 'failed'].includes((await ended()) ?? ''), 90_000);
    expect(await ended()).toBe('cancelled');
    expect(await containerStdout(w.docker, box!.Id, ['ps'])).not.toContain('sleep 30');
    // The client's cancels of its finished requests and of one it never made are ignored, and the session takes the next call at once.
    const own = (client.transport as StreamableHTTPClientTransport).sessionId!;
    const late = [...Array.from({ length: 10 }, (_, id) => id), 'no-such-request'].map((requestId) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } }));
    const again = await fetch(server.url, { method: 'POST', headers: { ...headers, 'mcp-session-id': own }, body: JSON.stringify(late) });
    expect(again.status).toBe(202);

    // A plain HTTP client taking JSON alone cancels its call the same way, and its call's POST is answered, not left open.
    const json = { ...headers, accept: 'application/json', 'mcp-session-id': other! };
    const call = fetch(server.url, { method: 'POST', headers: json, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'exec', arguments: { command: 'sleep 30', safe: true, session }, _meta: { progressToken: 'p' } } }) });
    await until('the second exec to start', async () => (await containerStdout(w.docker, box!.Id, ['ps'])).includes('sleep 30'), 60_000);
    const cancel = await fetch(server.url, { method: 'POST', headers: json, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'enough' } }) });
    expect(cancel.status).toBe(202);
    const answered = await call;
    expect(answered.headers.get('content-type')).toMatch(/^application\/json/);
    const answer = (await answered.json()) as { id: number; error: { code: number; message: string; data: { code: string } } };
    expect(answer).toMatchObject({ id: 7, error: { code: -32800, data: { code: 'request_cancelled' } } });
    // A cancel error, not the exec's result: the call did not sleep its 30 s.
    expect(answer.error.message).toContain('(enough)');
    await until('the second sleep to be gone', async () => !(await containerStdout(w.docker, box!.Id, ['ps'])).includes('sleep 30'), 60_000);
  });

  it("lets a call run on when the SDK client's cancel says only that its own request timeout passed (-32001), as over stdio", async () => {
    const w = await newWorld({ network: 'none' });
    const server = await w.startHttp(w.envArgs());
    const client = await w.connectHttp(server.url, server.token());
    const first = (await client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (first.structuredContent as { session: string }).session;
    const args = { command: 'sleep 4; echo ran-on', safe: true, call_id: 'http-timeout-1' };
    const timedOut = await client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 1_500 }).then(() => null, (e: unknown) => e as { code?: number });
    expect(timedOut?.code).toBe(-32001);
    const repeated = (await client.callTool({ name: 'exec', arguments: args })) as CallToolResult;
    expect(repeated.structuredContent).toMatchObject({ session, call_id: 'http-timeout-1', status: 'ok' });
    expect(repeated.content).toEqual([expect.objectContaining({ text: expect.stringContaining('ran-on') })]);
  });
});
