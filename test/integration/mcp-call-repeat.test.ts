import { type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { mcpWorldPerTest, toolText } from '../support/mcp-world';

const newWorld = mcpWorldPerTest();
const text = toolText;

describe('berth mcp: a call asked again while it runs', { timeout: 300_000 }, () => {
  it('answers a call sent twice at once with the same call_id (a client retrying before the first answer) with its one outcome, run once, and the server goes on', async () => {
    const w = await newWorld();
    const c = await w.connect(w.envArgs());
    const first = (await c.client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    expect(first.isError, text(first)).toBe(false);
    const exec = { name: 'exec', arguments: { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/twice; sleep 3; echo ran`, call_id: 'twice-1' } };
    const asked = (o: unknown) => (o instanceof Error ? `${o.message} ${JSON.stringify((o as { data?: unknown }).data)}` : o);
    const [one, two] = await Promise.all([
      c.client.callTool(exec, undefined, { timeout: 240_000 }).catch((e: unknown) => e),
      c.client.callTool(exec, undefined, { timeout: 240_000 }).catch((e: unknown) => e),
    ]);
    expect(one, String(asked(one))).not.toBeInstanceOf(Error);
    expect(two, String(asked(two))).not.toBeInstanceOf(Error);
    const a = one as CallToolResult;
    const b = two as CallToolResult;
    expect(a.structuredContent).toMatchObject({ call_id: 'twice-1', status: 'ok' });
    expect(b.structuredContent).toEqual(a.structuredContent);
    expect(text(b)).toContain('ran');
    expect(w.service.counts().twice).toBe(1);
    const after = (await c.client.callTool({ name: 'exec', arguments: { command: 'cat a.txt' } })) as CallToolResult;
    expect(text(after)).toContain('a');
  });
});
