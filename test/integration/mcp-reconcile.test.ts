import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { mcpWorldPerTest, toolText } from '../support/mcp-world';
import { readStore } from '../support/temp-store';

const newWorld = mcpWorldPerTest();
const text = toolText;

async function until(what: string, ok: () => boolean, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('berth mcp reconcile', { timeout: 300_000 }, () => {
  it('fails an uncertain call with decision fail: its run ends failed, its effect left uncertain (never run again), and the session takes calls again', async () => {
    const w = await newWorld();
    const first = await w.connect(w.envArgs());
    const wrote = (await first.client.callTool({ name: 'write_file', arguments: { path: 'kept.txt', content: 'kept\n' } })) as CallToolResult;
    const session = (wrote.structuredContent as { session: string }).session;
    const exec = { name: 'exec', arguments: { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/never && sleep 300`, call_id: 'never-1' } };
    const lost = first.client.callTool(exec, undefined, { timeout: 240_000 }).catch(() => 'lost');
    await until('the never call to start', () => (w.service.counts().never ?? 0) >= 1);
    process.kill(first.pid, 'SIGKILL');
    expect(await lost).toBe('lost');

    const next = await w.connect(['--session', session]);
    const uncertain = (await next.client.callTool(exec, undefined, { timeout: 240_000 })) as CallToolResult;
    expect(uncertain.structuredContent).toMatchObject({ status: 'uncertain' });
    const run = (uncertain.structuredContent as { run: string }).run;

    const decided = await next.client.callTool({ name: 'reconcile', arguments: { decision: 'fail' } }).catch((e: unknown) => e);
    expect(decided, decided instanceof McpError ? decided.message : '').not.toBeInstanceOf(McpError);
    expect((decided as CallToolResult).structuredContent).toMatchObject({ run, decision: 'fail', run_state: 'failed' });
    const effects = await readStore(w.store, (s) => s.listEffects({ runId: run }));
    // Nobody said it did not happen: it stays uncertain on record, and nothing runs it again.
    expect(effects.map((e) => e.status)).toEqual(['unknown']);
    const read = (await next.client.callTool({ name: 'read_file', arguments: { path: 'kept.txt' } })) as CallToolResult;
    expect(text(read)).toBe('kept\n');
    expect(w.service.counts().never).toBe(1);
  });
});
