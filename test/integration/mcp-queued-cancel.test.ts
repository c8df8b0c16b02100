import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { containerStdout } from '../support/agent-observe';
import { mcpWorldPerTest, toolText, type McpWorld } from '../support/mcp-world';
import { readStore } from '../support/temp-store';

const newWorld = mcpWorldPerTest();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** The end of each POST carrying a tools/call, by its call_id: when its last byte came and what the server answered. */
type Exchanges = Map<string, { endedAt: number; text: string }>;

/**
 * The client's fetch, watched: the SDK client rejects a cancelled call at once on its side and
 * ignores a late answer, so whether the server answered (and closed) the call's POST is seen here.
 */
function watchedFetch(ended: Exchanges): FetchLike {
  return async (url, init) => {
    const res = await fetch(url, init);
    const sent = typeof init?.body === 'string' ? (JSON.parse(init.body) as { params?: { arguments?: { call_id?: string } } }) : undefined;
    const callId = sent?.params?.arguments?.call_id;
    if (!callId || !res.body) return res;
    let text = '';
    const decoder = new TextDecoder();
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform: (chunk, out) => {
          text += decoder.decode(chunk, { stream: true });
          out.enqueue(chunk);
        },
        flush: () => void ended.set(callId, { endedAt: Date.now(), text }),
      }),
    );
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * A first call making the session, then a long exec running in the sandbox that ends only once
 * `release` is called (a gate file, not a sleep: the call ahead must still be running when the
 * queued call's POST is looked at, however slow the machine).
 */
async function longCallRunning(w: McpWorld, client: Client) {
  const first = (await client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
  const session = (first.structuredContent as { session: string }).session;
  let longDone = false;
  const command = 'echo up > /tmp/long-up; until [ -e /tmp/long-go ]; do sleep 0.1; done; echo long-done';
  const long = client.callTool({ name: 'exec', arguments: { command, safe: true, call_id: 'long-1' } }, undefined, { timeout: 180_000 }).finally(() => (longDone = true));
  const [box] = await w.docker.listContainers({ filters: { label: [`berth.session=${session}`] } });
  await until('the long exec to run', async () => (await containerStdout(w.docker, box!.Id, ['cat', '/tmp/long-up'])).includes('up'), 90_000);
  const release = async () => void (await containerStdout(w.docker, box!.Id, ['touch', '/tmp/long-go']));
  return { session, long: long as Promise<CallToolResult>, longDone: () => longDone, release };
}

/** The queued call never ran: no submission of its call_id, no run in `status`, and the file its command writes is absent. */
async function neverRan(w: McpWorld, client: Client, session: string): Promise<void> {
  expect(await readStore(w.store, (s) => s.findSubmission('mcp:queued-2'))).toBeUndefined();
  const status = (await client.callTool({ name: 'status', arguments: { session } })) as CallToolResult;
  const calls = (status.structuredContent as { calls: Array<{ call_id: string | null }> }).calls;
  expect(calls.map((c) => c.call_id)).toEqual([expect.any(String), 'long-1']);
  const read = (await client.callTool({ name: 'read_file', arguments: { path: 'queued.txt', session } })) as CallToolResult;
  expect(read.isError, toolText(read)).toBe(true);
}

describe('berth mcp when its client cancels a call queued behind another call of the same session', { timeout: 240_000 }, () => {
  it("over HTTP answers the queued call's POST request_cancelled at once, while the call ahead of it still runs; the queued call never runs and the call ahead ends as it would have", async () => {
    const w = await newWorld({ network: 'none' });
    const server = await w.startHttp(w.envArgs(), { BERTH_MCP_PROGRESS_MS: '100' });
    const ended: Exchanges = new Map();
    const client = await w.connectHttp(server.url, server.token(), { fetch: watchedFetch(ended) });
    const { session, long, longDone, release } = await longCallRunning(w, client);

    // Progress on the queued call says its POST is held by the server and its handler waits for the session's turn.
    const stop = new AbortController();
    let progressed = false;
    const queued = client
      .callTool({ name: 'exec', arguments: { command: 'echo ran > queued.txt', session, call_id: 'queued-2' } }, undefined, { signal: stop.signal, timeout: 180_000, onprogress: () => (progressed = true) })
      .then(() => 'answered', () => 'cancelled');
    await until('progress on the queued call', () => progressed, 60_000);
    const abortedAt = Date.now();
    stop.abort('the user gave up');
    expect(await queued).toBe('cancelled');

    await until("the queued call's POST to end", () => ended.has('queued-2'), 90_000);
    const answer = ended.get('queued-2')!;
    const waited = answer.endedAt - abortedAt;
    console.log(`queued call's POST answered ${waited} ms after its cancel: ${answer.text.trim().split('\n').at(-1)}`);
    // Before: the POST stayed open until the call ahead ended (here: never, until released), and only then said request_cancelled.
    expect(longDone(), `the queued call's POST was answered ${waited} ms after its cancel, after the call ahead of it ended`).toBe(false);
    expect(answer.text).toContain('"code":-32800');
    expect(answer.text).toContain('request_cancelled');
    expect(answer.text).toContain('(the user gave up) before it started; nothing ran');

    await release();
    const done = await long;
    expect(done.structuredContent).toMatchObject({ session, call_id: 'long-1', status: 'ok' });
    expect(toolText(done)).toContain('long-done');
    await neverRan(w, client, session);
  });

  it("over HTTP answers at once the POST of a queued call whose client stopped waiting (the SDK client's own request timeout, -32001), and still runs the call in its turn: a repeat of its call_id gets its outcome", async () => {
    const w = await newWorld({ network: 'none' });
    const server = await w.startHttp(w.envArgs());
    const ended: Exchanges = new Map();
    const client = await w.connectHttp(server.url, server.token(), { fetch: watchedFetch(ended) });
    const { session, long, longDone, release } = await longCallRunning(w, client);
    const args = { command: 'echo ran > queued.txt; echo queued-ran', session, call_id: 'queued-2' };
    const timedOut = await client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 2_000 }).then(() => null, (e: unknown) => e as { code?: number });
    expect(timedOut?.code).toBe(-32001);
    const gaveUpAt = Date.now();
    await until("the queued call's POST to end", () => ended.has('queued-2'), 90_000);
    const waited = ended.get('queued-2')!.endedAt - gaveUpAt;
    console.log(`timed-out queued call's POST answered ${waited} ms after the client gave up: ${ended.get('queued-2')!.text.trim().split('\n').at(-1)}`);
    expect(longDone(), `the timed-out queued call's POST was answered ${waited} ms after the client gave up, after the call ahead of it ended`).toBe(false);
    await release();
    expect((await long).structuredContent).toMatchObject({ session, call_id: 'long-1', status: 'ok' });
    const repeated = (await client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
    expect(repeated.structuredContent).toMatchObject({ session, call_id: 'queued-2', status: 'ok' });
    expect(toolText(repeated)).toContain('queued-ran');
    const runs = await readStore(w.store, (s) => s.listRuns({ sessionId: session }));
    expect(runs).toHaveLength(3);
  });

  it('over stdio runs the queued call never, and the call ahead ends as it would have (parity with HTTP)', async () => {
    const w = await newWorld({ network: 'none' });
    const c = await w.connect(w.envArgs());
    const { session, long, release } = await longCallRunning(w, c.client);
    // One pipe: the cancel reaches the server after the request it names.
    const stop = new AbortController();
    const queued = c.client.callTool({ name: 'exec', arguments: { command: 'echo ran > queued.txt', session, call_id: 'queued-2' } }, undefined, { signal: stop.signal, timeout: 180_000 }).then(() => 'answered', () => 'cancelled');
    await sleep(500);
    stop.abort('the user gave up');
    expect(await queued).toBe('cancelled');
    await release();
    const done = await long;
    expect(done.structuredContent).toMatchObject({ session, call_id: 'long-1', status: 'ok' });
    expect(toolText(done)).toContain('long-done');
    await neverRan(w, c.client, session);
  });
});
