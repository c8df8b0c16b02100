import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { mcpWorldPerTest, toolText, type McpWorld } from '../support/mcp-world';
import { bundledCli } from '../support/plan-fixture';
import { readStore } from '../support/temp-store';

const newWorld = mcpWorldPerTest();
const text = toolText;

type Answer = { id: unknown; error?: { code: number; message: string; data?: { code: string } }; result?: { serverInfo?: { name: string } } };

/** `berth mcp` on stdio with no SDK client: lines written as they are, `next(n)` the n-th line it answered, parsed. */
async function rawServer(w: McpWorld) {
  const child = spawn(process.execPath, [await bundledCli(), 'mcp', ...w.envArgs(), '--store', w.store], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (let nl = out.indexOf('\n'); nl >= 0; nl = out.indexOf('\n')) {
      lines.push(out.slice(0, nl));
      out = out.slice(nl + 1);
    }
  });
  const next = async (n: number): Promise<Answer> => {
    for (let i = 0; i < 600 && lines.length < n; i++) await new Promise((r) => setTimeout(r, 50));
    return JSON.parse(lines[n - 1]!) as Answer;
  };
  return { child, next };
}

describe('berth mcp on stdio', { timeout: 300_000 }, () => {
  it('answers a message over the size limit with a typed error to that request and goes on serving the session', async () => {
    const w = await newWorld();
    const c = await w.connect(w.envArgs());
    const first = (await c.client.callTool({ name: 'write_file', arguments: { path: 'small.txt', content: 'small\n' } })) as CallToolResult;
    expect(first.isError, text(first)).toBe(false);
    const big = 'x'.repeat(11 * 1024 * 1024);
    const refused = await c.client.callTool({ name: 'write_file', arguments: { path: 'big.txt', content: big } }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).code).toBe(-32600);
    expect((refused as McpError).message).toMatch(/request_too_large: the message is \d+ bytes; berth mcp reads messages up to 10485760 bytes/);
    expect(c.stderr()).toMatch(/over the limit of 10485760 bytes; answered with an error to request \d+/);
    // The same server and session go on: the small file is there, the big one was never written.
    const after = (await c.client.callTool({ name: 'exec', arguments: { command: 'cat small.txt; ls' } })) as CallToolResult;
    expect(after.isError, text(after)).toBe(false);
    expect(text(after)).toContain('small');
    expect(text(after)).not.toContain('big.txt');
  });

  it('refuses an id or a path over its size limit (a 1 MB call_id, session, path or resource URI) with -32602 naming the field and the limit, before anything of it reaches the store, and goes on serving', async () => {
    const w = await newWorld();
    const c = await w.connect(w.envArgs());
    const huge = 'x'.repeat(1_000_000);
    const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ['read_file', { path: 'hello.txt', call_id: huge }, 'call_id', /params\.arguments\.call_id is 1000000 characters long; it is at most 256 characters$/],
      ['read_file', { path: 'hello.txt', session: huge }, 'session', /params\.arguments\.session is 1000000 characters long; it is at most 256 characters$/],
      ['status', { session: huge }, 'session', /params\.arguments\.session is 1000000 characters long/],
      ['read_file', { path: huge }, 'path', /params\.arguments\.path is 1000000 bytes long; it is at most 4095 bytes \(a Linux path\)$/],
      ['search', { pattern: huge }, 'pattern', /params\.arguments\.pattern is 1000000 bytes long; it is at most 65536 bytes$/],
      ['exec', { command: huge }, 'command', /params\.arguments\.command is 1000000 bytes long; it is at most 131071 bytes \(one argument of a Linux process\)$/],
    ];
    for (const [name, args, field, why] of cases) {
      const err = await c.client.callTool({ name, arguments: args }).then(() => null, (e: unknown) => e);
      expect(err, `${name} ${field}`).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32602);
      expect((err as McpError).data).toMatchObject({ code: 'usage', field: `params.arguments.${field}` });
      expect((err as McpError).message).toMatch(why);
      // The value is not echoed back.
      expect((err as McpError).message.length).toBeLessThan(400);
    }
    const uri = await c.client.readResource({ uri: `berth://session/${huge}/workspace` }).then(() => null, (e: unknown) => e);
    expect((uri as McpError).data).toMatchObject({ code: 'resource_unknown' });
    expect((uri as McpError).message).toMatch(/no resource "berth:\/\/session\/x+"\.\.\. \(1000026 characters\); resources are/);
    expect(await readStore(w.store, (s) => s.listRuns())).toEqual([]);
    const stored = readdirSync(dirname(w.store)).filter((f) => f.startsWith(basename(w.store))).reduce((n, f) => n + statSync(join(dirname(w.store), f)).size, 0);
    expect(stored).toBeLessThan(1_000_000);
    const ok = (await c.client.callTool({ name: 'read_file', arguments: { path: 'hello.txt', call_id: 'c'.repeat(256) } })) as CallToolResult;
    expect([ok.isError, text(ok)]).toEqual([false, 'hello from the host\n']);
  });

  it('answers a line that is not a JSON-RPC message with a parse error and reads the next one', async () => {
    const w = await newWorld();
    const { child, next } = await rawServer(w);
    try {
      child.stdin.write('this is not json\n');
      const parse = await next(1);
      expect(parse.error?.code).toBe(-32700);
      expect(parse.error?.message).toMatch(/^parse_error: a line of stdin is not a JSON-RPC message/);
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })}\n`);
      const init = await next(2);
      expect(init.id).toBe(1);
      expect(init.result?.serverInfo?.name).toBeTruthy();
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('answers a line that is JSON but not a JSON-RPC message (an object as id, an empty batch) with -32600 invalid_request in one line, not a parse error, and reads the next one', async () => {
    const w = await newWorld();
    const { child, next } = await rawServer(w);
    try {
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: { obj: 1 }, method: 'tools/list' })}\n`);
      const objectId = await next(1);
      expect(objectId.id).toBeNull();
      expect(objectId.error).toMatchObject({ code: -32600, data: { code: 'invalid_request' } });
      expect(objectId.error!.message).toMatch(/^invalid_request: /);
      expect(objectId.error!.message).not.toContain('\n');
      child.stdin.write('[]\n');
      expect((await next(2)).error).toMatchObject({ code: -32600, data: { code: 'invalid_request' } });
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })}\n`);
      expect((await next(3)).id).toBe(1);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it("names an error's code once in the message a client reads (the SDK's prefix is not sent on the wire)", async () => {
    const w = await newWorld();
    const c = await w.connect(w.envArgs());
    const err = await c.client.callTool({ name: 'read_file', arguments: { path: 'hello.txt', session: 'ses_nope' } }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).message).toMatch(/^MCP error -32602: session_not_found: /);
    expect((err as McpError).data).toMatchObject({ code: 'session_not_found' });
  });

  it('answers a tools/call whose arguments nest 20,000 levels deep with -32602 naming the field, not a stack overflow as a server fault, and reads the next line', async () => {
    const w = await newWorld();
    const { child, next } = await rawServer(w);
    try {
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })}\n`);
      expect((await next(1)).id).toBe(1);
      const deep = `${'['.repeat(20_000)}1${']'.repeat(20_000)}`;
      child.stdin.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"d.txt","content":${deep}}}}\n`);
      const refused = await next(2);
      expect(refused.id).toBe(2);
      expect(refused.error).toMatchObject({ code: -32602, data: { code: 'usage', field: 'params.arguments' } });
      expect(refused.error!.message).toBe('invalid tools/call request: params.arguments nest deeper than 64 levels of arrays and objects');
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' })}\n`);
      expect((await next(3)).id).toBe(3);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
