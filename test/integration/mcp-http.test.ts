import { request } from 'node:http';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { requireEngine } from '../support/docker-engine';
import { mcpWorld } from '../support/mcp-world';
import { readStore } from '../support/temp-store';

let world: Awaited<ReturnType<typeof mcpWorld>> | undefined;
afterEach(async () => {
  await world?.cleanup();
  world = undefined;
});

/** One real POST to `url` with a Host header of our choosing (fetch forbids setting it). */
function postWithHost(url: string, host: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { ...headers, host } }, (res) => {
      let got = '';
      res.setEncoding('utf8').on('data', (d: string) => (got += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: got }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

describe('berth mcp --http: Streamable HTTP on loopback with the serve token', { timeout: 600_000 }, () => {
  it('drives a session over HTTP and continues it after the server is killed and started again', async () => {
    const w = (world = await mcpWorld());
    const first = await w.startHttp(w.envArgs());
    const client = await w.connectHttp(first.url, first.token());
    const wrote = (await client.callTool({ name: 'write_file', arguments: { path: 'http.txt', content: 'over http\n' } })) as CallToolResult;
    expect(wrote.isError, text(wrote)).toBe(false);
    const session = (wrote.structuredContent as { session: string }).session;
    first.child.kill('SIGKILL');

    const second = await w.startHttp(['--session', session]);
    const again = await w.connectHttp(second.url, second.token());
    const ran = (await again.callTool({ name: 'exec', arguments: { command: 'cat http.txt hello.txt' } })) as CallToolResult;
    expect(text(ran)).toContain('over http');
    expect(text(ran)).toContain('hello from the host');
    expect(ran.structuredContent).toMatchObject({ session, status: 'ok' });
  });

  it('refuses a request with a wrong token with 401 and a typed error, running nothing; the session goes on with the right one, its workspace intact', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const client = await w.connectHttp(server.url, server.token());
    const wrote = (await client.callTool({ name: 'write_file', arguments: { path: 'kept.txt', content: 'before the bad token\n' } })) as CallToolResult;
    expect(wrote.isError, text(wrote)).toBe(false);
    const session = (wrote.structuredContent as { session: string }).session;
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer not-the-token' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'exec', arguments: { command: 'true' } } }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: { data: { code: 'unauthorized' } } });
    await expect(w.connectHttp(server.url, 'not-the-token')).rejects.toThrow(/401|unauthorized/);
    // Only the call made with the right token is a run.
    expect((await readStore(w.store, (s) => s.listRuns())).map((r) => r.id)).toEqual([(wrote.structuredContent as { run: string }).run]);
    const read = (await client.callTool({ name: 'read_file', arguments: { path: 'kept.txt' } })) as CallToolResult;
    expect(text(read)).toBe('before the bad token\n');
    expect(read.structuredContent).toMatchObject({ session, status: 'ok' });
  });

  it("answers a call repeated by a new client after the first client disconnected mid-call with the one execution's outcome, and the session takes calls after it", async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const first = await w.connectHttp(server.url, server.token());
    const wrote = (await first.callTool({ name: 'write_file', arguments: { path: 'kept.txt', content: 'x\n' } })) as CallToolResult;
    const session = (wrote.structuredContent as { session: string }).session;
    // Still running when the client goes: it has reached the service and sleeps well past the reconnect.
    const args = { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/once && sleep 8 && echo done >> once.txt`, call_id: 'gone-1' };
    const lost = first.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 240_000 }).then(
      () => 'answered',
      () => 'lost',
    );
    const end = Date.now() + 120_000;
    while ((w.service.counts().once ?? 0) === 0) {
      if (Date.now() > end) throw new Error('the call never reached the service');
      await new Promise((r) => setTimeout(r, 50));
    }
    // The client goes (its connections are cut), sending no cancel: aborting the call's signal
    // would send notifications/cancelled, which now reaches the call over HTTP as over stdio.
    await first.close();
    expect(await lost).toBe('lost');

    const second = await w.connectHttp(server.url, server.token());
    const again = (await second.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 240_000 })) as CallToolResult;
    expect(again.structuredContent).toMatchObject({ session, call_id: 'gone-1', status: 'ok' });
    expect(again.isError, text(again)).toBe(false);
    const read = (await second.callTool({ name: 'read_file', arguments: { path: 'once.txt' } }, undefined, { timeout: 60_000 })) as CallToolResult;
    expect(text(read)).toBe('done\n');
    expect(w.service.counts().once).toBe(1);
  });

  it('answers GET and DELETE at /mcp with 405 and a typed error at once, since a stateless server has no stream to hold open or session to end; clients go on with POSTs', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const auth = { authorization: `Bearer ${server.token()}` };
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(server.url, { method, headers: { ...auth, accept: 'text/event-stream' }, signal: AbortSignal.timeout(60_000) });
      expect(res.status, method).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect(await res.json()).toMatchObject({ error: { data: { code: 'method_not_allowed' } } });
    }
    const client = await w.connectHttp(server.url, server.token());
    const wrote = (await client.callTool({ name: 'write_file', arguments: { path: 'post.txt', content: 'posted\n' } })) as CallToolResult;
    expect(wrote.isError, text(wrote)).toBe(false);
  });

  it("answers status while another client's call is still running, showing that call pending, instead of waiting for it to end", async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const first = await w.connectHttp(server.url, server.token());
    const wrote = (await first.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (wrote.structuredContent as { session: string }).session;
    // Held until the test releases it: the status below is asked while it runs, however slow the machine.
    const held = first.callTool({ name: 'exec', arguments: { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/held && until [ -f /tmp/release ]; do sleep 0.2; done; echo released`, call_id: 'held-1' } }, undefined, { timeout: 240_000 });
    held.catch(() => {}); // awaited below; a failure before that must not be unhandled
    const end = Date.now() + 120_000;
    while ((w.service.counts().held ?? 0) === 0) {
      if (Date.now() > end) throw new Error('the held call never reached the service');
      await new Promise((r) => setTimeout(r, 50));
    }
    const other = await w.connectHttp(server.url, server.token());
    const status = (await other.callTool({ name: 'status', arguments: { session } }, undefined, { timeout: 60_000 })) as CallToolResult;
    const calls = (status.structuredContent as { calls: Array<{ run_state: string; status: string }> }).calls;
    expect(calls).toHaveLength(2);
    expect(calls.map((c) => c.status).sort()).toEqual(['ok', 'pending']);
    expect(calls.find((c) => c.status === 'pending')!.run_state).toBe('running');

    const docker = await requireEngine();
    const [box] = await docker.listContainers({ filters: { label: [`berth.session=${session}`] } });
    await (await docker.getContainer(box!.Id).exec({ Cmd: ['touch', '/tmp/release'] })).start({ hijack: true, stdin: false }).then((s) => new Promise((r) => (s.on('end', r), s.resume())));
    expect(text((await held) as CallToolResult)).toContain('released');
  });

  it("keeps a call and a workspace read alive past the client's short request timeout when it asks for progress (resetTimeoutOnProgress): the answer is an SSE stream of notifications/progress, then the result", async () => {
    const w = (world = await mcpWorld());
    // An interval 20 times shorter than the client's timeout: only a server stalled for 2 s could miss it.
    const server = await w.startHttp(w.envArgs(), { BERTH_MCP_PROGRESS_MS: '100' });
    const client = await w.connectHttp(server.url, server.token());
    const wrote = (await client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (wrote.structuredContent as { session: string }).session;
    const timeout = 2_000;
    const progress = { exec: 0, read: 0 };
    const settled = { exec: false, read: false };
    const asking = (k: 'exec' | 'read') => ({ timeout, resetTimeoutOnProgress: true, onprogress: () => void (progress[k] += 1) });
    // Held until the test releases it, once both requests have outlived their timeout: not a sleep's luck.
    const command = `timeout 20 busybox wget -q -O - http://localhost:${w.port}/held && until [ -f /tmp/release ]; do sleep 0.1; done; echo outlived-the-timeout`;
    const held = client.callTool({ name: 'exec', arguments: { command } }, undefined, asking('exec')).then((r) => r as CallToolResult, (e: unknown) => e as Error).finally(() => (settled.exec = true));
    const waitFor = async (what: string, ok: () => boolean) => {
      const end = Date.now() + 120_000;
      while (!ok()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await waitFor('the held call to reach the service', () => (w.service.counts().held ?? 0) > 0 || settled.exec);
    // The session takes one call at a time: the workspace read (a list_files call) waits behind the held one.
    const readFrom = Date.now();
    const read = client.readResource({ uri: `berth://session/${session}/workspace` }, asking('read')).then((r) => r, (e: unknown) => e as Error).finally(() => (settled.read = true));
    // Before: no progress over HTTP, and each request failed at its timeout ("MCP error -32001: Request timed out").
    await waitFor('both requests to outlive their timeout', () => (progress.exec > 0 && progress.read > 0 && Date.now() - readFrom > 1.5 * timeout) || settled.exec || settled.read);
    const docker = await requireEngine();
    const [box] = await docker.listContainers({ filters: { label: [`berth.session=${session}`] } });
    await (await docker.getContainer(box!.Id).exec({ Cmd: ['touch', '/tmp/release'] })).start({ hijack: true, stdin: false }).then((s) => new Promise((r) => (s.on('end', r), s.resume())));
    const ran = await held;
    expect(ran, String(ran)).not.toBeInstanceOf(Error);
    expect(text(ran as CallToolResult)).toContain('outlived-the-timeout');
    const listed = await read;
    expect(listed, String(listed)).not.toBeInstanceOf(Error);
    expect((listed as { contents: Array<{ text?: string }> }).contents[0]!.text).toContain('a.txt');
    expect(progress.exec).toBeGreaterThanOrEqual(1);
    expect(progress.read).toBeGreaterThanOrEqual(1);
  });

  it('takes the Host header as berth serve does: any letter case and [::1] with the port are this server, another name is refused with 421 and a typed error', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const port = new URL(server.url).port;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token()}` };
    const hello = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'host-test', version: '1' } } });
    for (const host of [`127.0.0.1:${port}`, `LOCALHOST:${port}`, `LocalHost:${port}`, `[::1]:${port}`]) {
      const r = await postWithHost(server.url, host, headers, hello);
      expect(r.status, `${host}: ${r.body}`).toBe(200);
      // A request that asks for no progress is answered as one JSON body, not a stream.
      expect(JSON.parse(r.body), host).toMatchObject({ id: 1, result: { serverInfo: { name: 'berth' } } });
    }
    for (const host of [`evil.example:${port}`, 'localhost', `127.0.0.1:${Number(port) + 1}`, `localhost.evil.example:${port}`]) {
      const r = await postWithHost(server.url, host, headers, hello);
      expect(r.status, host).toBe(421);
      expect(JSON.parse(r.body), host).toMatchObject({ error: { data: { code: 'host_refused' } } });
    }
  });

  it('takes a message as large as stdio does (a 6 MiB write_file) and refuses a larger one, declared or chunked, with 413 and the typed request_too_large error; the session goes on', async () => {
    const w = (world = await mcpWorld());
    const server = await w.startHttp(w.envArgs());
    const client = await w.connectHttp(server.url, server.token());
    const content = 'y'.repeat(6 * 1024 * 1024);
    const wrote = (await client.callTool({ name: 'write_file', arguments: { path: 'six.txt', content } }, undefined, { timeout: 240_000 })) as CallToolResult;
    expect(wrote.isError, text(wrote)).toBe(false);
    const port = new URL(server.url).port;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token()}` };
    const huge = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'huge.txt', content: 'z'.repeat(11 * 1024 * 1024) } } });
    const declared = await postWithHost(server.url, `127.0.0.1:${port}`, headers, huge);
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const u = new URL(server.url);
      const req = request({ hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
        let got = '';
        res.setEncoding('utf8').on('data', (d: string) => (got += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: got }));
      });
      req.on('error', (err) => (err.message.includes('EPIPE') || err.message.includes('ECONNRESET') ? undefined : reject(err)));
      for (let i = 0; i < huge.length; i += 1 << 20) req.write(huge.slice(i, i + (1 << 20)));
      req.end();
    });
    for (const [how, r] of [['declared', declared], ['chunked', chunked]] as const) {
      expect(r.status, how).toBe(413);
      expect(JSON.parse(r.body), how).toMatchObject({ error: { data: { code: 'request_too_large' } } });
      expect(JSON.parse(r.body).error.message, how).toMatch(/10485760 bytes/);
    }
    const after = (await client.callTool({ name: 'exec', arguments: { command: 'wc -c six.txt; ls' } })) as CallToolResult;
    expect(text(after)).toContain('6291456 six.txt');
    expect(text(after)).not.toContain('huge.txt');
  });
});
