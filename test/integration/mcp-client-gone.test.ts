import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { mcpWorldPerTest, toolText } from '../support/mcp-world';

const newWorld = mcpWorldPerTest();
const text = toolText;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

describe('berth mcp on stdio when its client is SIGKILLed', { timeout: 300_000 }, () => {
  it('ends the server whose client was killed during a long exec, and a new server answers that call as uncertain without running it again', async () => {
    const w = await newWorld();
    const setup = await w.connect(w.envArgs());
    const first = (await setup.client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'before the kill\n' } })) as CallToolResult;
    expect(first.isError, text(first)).toBe(false);
    const session = (first.structuredContent as { session: string }).session;
    await setup.close();

    const exec = { name: 'exec', arguments: { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/long; sleep 300`, call_id: 'long-1' } };
    const client = await w.spawnClient(['--session', session], exec);
    await until('the long exec to start', () => (w.service.counts().long ?? 0) >= 1, 120_000);
    client.child.kill('SIGKILL');
    // Its stdin ended: the server stops its calls and exits (the sandbox and session stay).
    await until(`the orphaned server ${client.serverPid} to exit`, () => !alive(client.serverPid), 45_000);

    const next = await w.connect(['--session', session]);
    const again = (await next.client.callTool(exec, undefined, { timeout: 240_000 })) as CallToolResult;
    expect(again.structuredContent).toMatchObject({ session, call_id: 'long-1', status: 'uncertain' });
    expect(w.service.counts().long).toBe(1);
    const refused = await next.client.callTool({ name: 'exec', arguments: { command: 'true' } }).catch((e: unknown) => e);
    expect((refused as McpError).data).toMatchObject({ code: 'session_needs_reconciliation' });
    await next.client.callTool({ name: 'reconcile', arguments: { decision: 'accept' } });
    const read = (await next.client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } })) as CallToolResult;
    expect(text(read)).toBe('before the kill\n');
    expect(w.service.counts().long).toBe(1);
  });
});
