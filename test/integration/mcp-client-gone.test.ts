import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { containerStdout } from '../support/agent-observe';
import { mcpWorldPerTest, toolText } from '../support/mcp-world';
import { readStore } from '../support/temp-store';

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

async function until(what: string, ok: () => boolean, ms: number, refresh?: () => Promise<unknown>): Promise<void> {
  const end = Date.now() + ms;
  while ((await refresh?.(), !ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(refresh ? 300 : 100);
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

describe('berth mcp when its client cancels a call (notifications/cancelled)', { timeout: 300_000 }, () => {
  it('stops the cancelled long exec at once and reports it uncertain (status, a repeat of its call_id) for a reconcile decision instead of running it on; the session goes on after the decision', async () => {
    const w = await newWorld();
    const c = await w.connect(w.envArgs());
    const first = (await c.client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (first.structuredContent as { session: string }).session;
    const stop = new AbortController();
    const args = { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/cancel; sleep 300; echo late > late.txt`, call_id: 'cancel-1' };
    const asked = c.client.callTool({ name: 'exec', arguments: args }, undefined, { signal: stop.signal, timeout: 400_000 }).then(
      () => 'answered',
      () => 'cancelled',
    );
    await until('the long exec to start', () => (w.service.counts().cancel ?? 0) >= 1, 120_000);
    stop.abort('the user gave up');
    expect(await asked).toBe('cancelled');
    // Not the 300 s the command would take: the run is cancelled, and the command with it.
    type Status = { awaiting_reconcile: string | null; calls: Array<{ call_id: string | null; tool: string | null; run: string; run_state: string; status: string }> };
    let status: Status | undefined;
    const end = Date.now() + 90_000;
    while (!status?.awaiting_reconcile) {
      if (Date.now() > end) throw new Error(`the cancelled call was not stopped within 90 s: ${JSON.stringify(status)}`);
      await sleep(500);
      status = ((await c.client.callTool({ name: 'status', arguments: {} })) as CallToolResult).structuredContent as Status;
    }
    const cancelled = status.calls.find((x) => x.run === status!.awaiting_reconcile);
    expect(cancelled).toMatchObject({ call_id: 'cancel-1', tool: 'exec', run_state: 'needs_reconciliation', status: 'uncertain' });
    const repeated = (await c.client.callTool({ name: 'exec', arguments: args })) as CallToolResult;
    expect(repeated.structuredContent).toMatchObject({ session, call_id: 'cancel-1', status: 'uncertain' });
    expect(text(repeated)).toContain('cancelled while it ran, so it may or may not have taken effect');
    const refused = await c.client.callTool({ name: 'exec', arguments: { command: 'true' } }).catch((e: unknown) => e);
    expect((refused as McpError).data).toMatchObject({ code: 'session_needs_reconciliation' });
    await c.client.callTool({ name: 'reconcile', arguments: { decision: 'fail' } });
    const after = (await c.client.callTool({ name: 'exec', arguments: { command: 'ls; cat a.txt' } })) as CallToolResult;
    expect(after.structuredContent).toMatchObject({ session, status: 'ok' });
    expect(text(after)).not.toContain('late.txt');
    expect(w.service.counts().cancel).toBe(1);
  });

  it('ends a cancelled safe call in a sandbox with no network cancelled, without asking for a decision: it changed nothing, and the session goes on at once', async () => {
    const w = await newWorld({ network: 'none' });
    const c = await w.connect(w.envArgs());
    const first = (await c.client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (first.structuredContent as { session: string }).session;
    const stop = new AbortController();
    const args = { command: 'sleep 300; cat a.txt', safe: true, call_id: 'safe-cancel-1' };
    const asked = c.client.callTool({ name: 'exec', arguments: args }, undefined, { signal: stop.signal, timeout: 400_000 }).then(() => 'answered', () => 'cancelled');
    let running: string | undefined;
    await until('the safe exec to be executing', () => running !== undefined, 120_000, async () => {
      const runs = await readStore(w.store, (s) => s.listRuns({ sessionId: session }));
      for (const r of runs) if ((await readStore(w.store, (s) => s.listEffects({ runId: r.id }))).some((e) => e.status === 'executing')) running = r.id;
    });
    stop.abort('the user gave up');
    expect(await asked).toBe('cancelled');
    type Status = { awaiting_reconcile: string | null; calls: Array<{ call_id: string | null; run: string; run_state: string; status: string }> };
    let call: Status['calls'][number] | undefined;
    let status: Status | undefined;
    await until('the cancelled call to end', () => call !== undefined && !['running', 'cancelling', 'pending'].includes(call.run_state), 90_000, async () => {
      status = ((await c.client.callTool({ name: 'status', arguments: {} })) as CallToolResult).structuredContent as Status;
      call = status.calls.find((x) => x.run === running);
    });
    // Before: needs_reconciliation, status uncertain, and no further call until a reconcile decision.
    expect(call).toMatchObject({ call_id: 'safe-cancel-1', run_state: 'cancelled', status: 'error' });
    expect(status!.awaiting_reconcile).toBeNull();
    const effect = (await readStore(w.store, (s) => s.listEffects({ runId: running! })))[0];
    expect(effect).toMatchObject({ status: 'failed', error: { code: 'cancelled_not_applied' } });
    const repeated = (await c.client.callTool({ name: 'exec', arguments: args })) as CallToolResult;
    expect(repeated.structuredContent).toMatchObject({ session, call_id: 'safe-cancel-1', status: 'error' });
    expect(text(repeated)).toContain('cancelled while it ran; a safe call in a sandbox with no network changed nothing');
    const next = (await c.client.callTool({ name: 'exec', arguments: { command: 'cat a.txt' } })) as CallToolResult;
    expect(next.structuredContent).toMatchObject({ session, status: 'ok' });
  });

  it('keeps a call alive past the SDK client\'s own short timeout while its command runs, when the client asks for progress (resetTimeoutOnProgress): the server sends notifications/progress at its interval', async () => {
    const w = await newWorld();
    // An interval 20 times shorter than the client's timeout: only a server stalled for 5 s could miss it.
    const c = await w.connect(w.envArgs(), { BERTH_MCP_PROGRESS_MS: '250' });
    const progress: Array<{ progress: number; message?: string }> = [];
    const args = { command: 'sleep 12; echo outlived-the-timeout', call_id: 'progress-1' };
    const r = (await c.client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 5_000, resetTimeoutOnProgress: true, onprogress: (p) => progress.push(p) }).catch((e: unknown) => e)) as CallToolResult;
    // Before: MCP error -32001: Request timed out, 5 s into the 12 s command.
    expect(r, String(r)).not.toBeInstanceOf(Error);
    expect(r.structuredContent).toMatchObject({ call_id: 'progress-1', status: 'ok' });
    expect(text(r)).toContain('outlived-the-timeout');
    expect(progress.length).toBeGreaterThan(2);
    // Progress only grows (the SDK's and the spec's rule), and says what it counts.
    expect(progress.every((p, i) => i === 0 || p.progress > progress[i - 1]!.progress)).toBe(true);
    expect(progress.at(-1)!.message).toMatch(/^exec running for \d+ s$/);
  });

  it('lets a call whose client stopped waiting (the SDK client\'s own request timeout) run on: its repeat gets the outcome, and the session needs no decision', async () => {
    const w = await newWorld();
    const c = await w.connect(w.envArgs());
    const first = (await c.client.callTool({ name: 'write_file', arguments: { path: 'a.txt', content: 'a\n' } })) as CallToolResult;
    const session = (first.structuredContent as { session: string }).session;
    const args = { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/slow; while [ ! -e /tmp/released ]; do sleep 0.2; done; echo ran-to-its-end`, call_id: 'slow-1' };
    // The SDK's client cancels its request when its timeout passes (60 s by default, 2 s here).
    const timedOut = await c.client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 2_000 }).then(() => null, (e: unknown) => e as McpError);
    expect(timedOut?.code).toBe(-32001);
    await until('the exec to start', () => (w.service.counts().slow ?? 0) >= 1, 120_000);
    // Before: the timeout's cancel cancelled the call's run; the server now says it lets it run on.
    await until('the server to say the call goes on', () => c.stderr().includes('berth mcp: the client stopped waiting for call slow-1 (its own request timeout); the call goes on'), 120_000);
    const now = ((await c.client.callTool({ name: 'status', arguments: {} })) as CallToolResult).structuredContent as { calls: Array<{ call_id: string | null; status: string }> };
    expect(now.calls.find((x) => x.call_id === 'slow-1')?.status).toBe('pending');
    const container = (await w.docker.listContainers({ filters: { label: [`berth.host=${w.hostId}`] } })).find((x) => x.Names.some((n) => n.startsWith('/berth-lease_')));
    await containerStdout(w.docker, container!.Id, ['touch', '/tmp/released']);
    // Before (the cancel carried out first): the repeat said 'cancelled while it ran ...' (uncertain)
    // and the next call was refused until a reconcile decision.
    const repeated = (await c.client.callTool({ name: 'exec', arguments: args })) as CallToolResult;
    expect(repeated.structuredContent).toMatchObject({ session, call_id: 'slow-1', status: 'ok' });
    expect(text(repeated)).toContain('ran-to-its-end');
    const next = (await c.client.callTool({ name: 'exec', arguments: { command: 'cat a.txt' } })) as CallToolResult;
    expect(next.structuredContent).toMatchObject({ session, status: 'ok' });
    expect(w.service.counts().slow).toBe(1);
  });
});
