import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { mcpWorld, type McpConnection } from '../support/mcp-world';
import { readStore } from '../support/temp-store';

type World = Awaited<ReturnType<typeof mcpWorld>>;
let world: World | undefined;
afterEach(async () => {
  await world?.cleanup();
  world = undefined;
});

type Structured = { session: string; run: string; call_id: string; status: string };

async function call(c: McpConnection, args: Record<string, unknown>) {
  const r = (await c.client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 240_000 })) as CallToolResult;
  return { ...r, text: r.content.map((x) => (x.type === 'text' ? x.text : '')).join('\n'), s: r.structuredContent as Structured };
}

async function until(what: string, ok: () => Promise<boolean>, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * An MCP call is six commits: the submission (with its root's start), the root's commit of the
 * dictated call (with the call's intent, its tool task begun in `execute`), the effect's executing
 * mark, the result, then the root's wake and end, which follow the answer. The server is SIGKILLed
 * right after each of the first four, and a new server is asked the same call (same `call_id`).
 */
describe('berth mcp: a server killed at each commit boundary of a call', { timeout: 600_000 }, () => {
  it('resumes the call from the boundary: run once when its intent was committed but nothing began, the committed answer when its result was, uncertain and never run when it was marked executing; a safe call marked executing runs once', async () => {
    const w = (world = await mcpWorld());
    const wget = (name: string) => `timeout 20 busybox wget -q -O - http://localhost:${w.port}/${name}`;
    const first = await w.connect(w.envArgs());
    const session = (await call(first, { command: 'true' })).s.session;
    await first.close();
    const cases = [
      { fault: 'after:submit', name: 'submitted', safe: false, status: 'ok', runs: 1 },
      { fault: 'after:phase.spawn:agent', name: 'intended', safe: false, status: 'ok', runs: 1 },
      { fault: 'after:phase.complete:agent-tool', name: 'answered', safe: false, status: 'ok', runs: 1 },
      { fault: 'after:effect.begin:agent-tool', name: 'safe-begun', safe: true, status: 'ok', runs: 1 },
      // Last: the session then waits for a reconcile decision.
      { fault: 'after:effect.begin:agent-tool', name: 'never-begun', safe: false, status: 'uncertain', runs: 0 },
    ];
    for (const c of cases) {
      const args = { command: `${wget(c.name)}; echo ran-${c.name}`, call_id: c.name, ...(c.safe ? { safe: true } : {}) };
      const killed = await w.connect(['--session', session], { BERTH_FAULT: c.fault });
      const lost = await killed.client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 240_000 }).then(
        () => 'answered',
        () => 'lost',
      );
      expect(lost, c.fault).toBe('lost');
      const resumed = await w.connect(['--session', session]);
      const r = await call(resumed, args);
      expect(r.s, c.fault).toMatchObject({ session, call_id: c.name, status: c.status });
      if (c.status === 'ok') expect(r.text).toContain(`ran-${c.name}`);
      else expect(r.text).toContain('may or may not have taken effect');
      // Asked again: the same committed outcome, nothing run again.
      expect((await call(resumed, args)).s.status).toBe(c.status);
      expect(w.service.counts()[c.name] ?? 0, c.fault).toBe(c.runs);
      const end = c.status === 'ok' ? 'completed' : 'needs_reconciliation';
      await until(`run of ${c.name} to be ${end}`, async () => (await readStore(w.store, (s) => s.getRun(r.s.run)))?.state === end);
      await resumed.close();
    }
  });
});
