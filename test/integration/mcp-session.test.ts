import { CallToolResultSchema, McpError, ReadResourceResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mcpWorld, type McpConnection } from '../support/mcp-world';
import { bundledCli } from '../support/plan-fixture';
import { readStore } from '../support/temp-store';

type World = Awaited<ReturnType<typeof mcpWorld>>;
let world: World | undefined;
afterEach(async () => {
  await world?.cleanup();
  world = undefined;
});

type Structured = { session: string; run: string; call_id: string; status: string };
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

async function call(c: McpConnection, name: string, args: Record<string, unknown>) {
  const r = (await c.client.callTool({ name, arguments: args }, undefined, { timeout: 240_000 })) as CallToolResult;
  return { ...r, text: text(r), s: r.structuredContent as Structured };
}

async function until(what: string, ok: () => boolean, ms = 120_000, refresh?: () => Promise<unknown>): Promise<void> {
  const end = Date.now() + ms;
  while ((await refresh?.(), !ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Starts a call, waits until its command reached the counting service, and SIGKILLs the server under it. */
async function killDuring(c: McpConnection, w: World, counter: string, args: Record<string, unknown>): Promise<void> {
  const before = w.service.counts()[counter] ?? 0;
  const pending = c.client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 240_000 }).then(
    () => 'answered',
    () => 'lost',
  );
  await until(`${counter} to be reached`, () => (w.service.counts()[counter] ?? 0) > before);
  process.kill(c.pid, 'SIGKILL');
  expect(await pending).toBe('lost');
}

describe('berth mcp: a Berth session as the sandbox of an MCP client', { timeout: 600_000 }, () => {
  it('keeps the workspace across server kills, re-runs a safe call once and reports a never call as uncertain without running it again', async () => {
    const w = (world = await mcpWorld());
    const wget = (name: string) => `timeout 20 busybox wget -q -O - http://localhost:${w.port}/${name}`;
    const first = await w.connect(w.envArgs());
    const tools = (await first.client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['exec', 'read_file', 'write_file', 'edit', 'list_files', 'search', 'status', 'reconcile']));

    const wrote = await call(first, 'write_file', { path: 'notes.txt', content: 'kept across restarts\n' });
    expect(wrote.isError, wrote.text).toBe(false);
    const session = wrote.s.session;
    const ran = await call(first, 'exec', { command: 'cat notes.txt hello.txt' });
    expect(ran.text).toContain('kept across restarts');
    expect(ran.text).toContain('hello from the host');

    // A safe call in flight: the marker outside the workspace makes only its first run block.
    const safeArgs = { command: `${wget('safe')}; if [ ! -f /tmp/safe-once ]; then touch /tmp/safe-once; sleep 300; fi; echo safe-done`, safe: true, call_id: 'safe-1' };
    await killDuring(first, w, 'safe', safeArgs);
    const second = await w.connect(['--session', session]);
    const safe = await call(second, 'exec', safeArgs);
    expect(safe.text).toContain('safe-done');
    expect(safe.s).toMatchObject({ session, call_id: 'safe-1', status: 'ok' });
    expect(w.service.counts().safe).toBe(2);

    // A never call in flight: settled as uncertain, never run again, however often it is asked for.
    const neverArgs = { command: `${wget('never')} && sleep 300`, call_id: 'never-1' };
    await killDuring(second, w, 'never', neverArgs);
    const third = await w.connect(['--session', session]);
    const never = await call(third, 'exec', neverArgs);
    expect(never.isError).toBe(true);
    expect(never.s).toMatchObject({ session, call_id: 'never-1', status: 'uncertain' });
    expect(never.text).toContain('may or may not have taken effect');
    const again = await call(third, 'exec', neverArgs);
    expect(again.s.status).toBe('uncertain');
    expect(w.service.counts().never).toBe(1);

    // The session waits for a decision on the uncertain call, then continues in the same workspace.
    const refused = await third.client.callTool({ name: 'exec', arguments: { command: 'true' } }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).data).toMatchObject({ code: 'session_needs_reconciliation' });
    const status = await call(third, 'status', {});
    expect(status.structuredContent).toMatchObject({ session, awaiting_reconcile: never.s.run });
    const decided = await call(third, 'reconcile', { decision: 'accept' });
    expect(decided.structuredContent).toMatchObject({ run_state: 'completed' });
    const read = await call(third, 'read_file', { path: 'notes.txt' });
    expect(read.text).toContain('kept across restarts');
    expect(w.service.counts()).toEqual({ safe: 2, never: 1 });
  });

  it('holds a call of a tool that needs approval until an operator approves it, then runs it once', async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect([...w.envArgs(), '--require-approval', 'exec']);
    const wrote = await call(c, 'write_file', { path: 'a.txt', content: 'approved later\n' });
    expect(wrote.s.status).toBe('ok');
    const pending = call(c, 'exec', { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/approved && cat a.txt`, call_id: 'ap-1' });
    let runId: string | undefined;
    for (let i = 0; i < 600 && !runId; i++) {
      runId = await readStore(w.store, async (s) => (await s.listRuns()).find((r) => r.state === 'awaiting_approval')?.id);
      if (!runId) await new Promise((r) => setTimeout(r, 200));
    }
    expect(runId).toBeDefined();
    expect(w.service.counts().approved).toBeUndefined();
    execFileSync(process.execPath, [await bundledCli(), 'approve', runId!, 'ap-1', '--store', w.store], { env: { ...process.env, BERTH_OPERATOR: 'tester' } });
    const done = await pending;
    expect(done.s).toMatchObject({ call_id: 'ap-1', status: 'ok' });
    expect(done.text).toContain('approved later');
    expect(w.service.counts().approved).toBe(1);
  });

  it('forks a session after one of its calls: the fork has that workspace, the original keeps its own', async () => {
    const w = (world = await mcpWorld({ snapshotPolicy: 'after-each-step' }));
    const c = await w.connect(w.envArgs());
    const one = await call(c, 'write_file', { path: 'v.txt', content: 'one\n' });
    const session = one.s.session;
    await call(c, 'write_file', { path: 'v.txt', content: 'two\n' });
    const forked = await call(c, 'fork', { after_call: 1 });
    const fork = (forked.structuredContent as { session: string }).session;
    expect(fork).not.toBe(session);
    expect((await call(c, 'read_file', { path: 'v.txt', session: fork })).text).toBe('one\n');
    expect((await call(c, 'read_file', { path: 'v.txt', session })).text).toBe('two\n');
    const bad = await c.client.callTool({ name: 'fork', arguments: { after_call: 9 } }).catch((e: unknown) => e);
    expect((bad as McpError).data).toMatchObject({ code: 'fork_invalid' });
  });

  it("exposes the session's run record as a resource: every call's exported run, readable from the store alone", async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const wrote = await call(c, 'write_file', { path: 'r.txt', content: 'kept in the record\n' });
    const ran = await call(c, 'exec', { command: 'cat r.txt' });
    const uri = `berth://session/${wrote.s.session}/record`;
    expect((await c.client.listResources()).resources.map((r) => r.uri)).toEqual([uri, `berth://session/${wrote.s.session}/workspace`]);
    const read = await c.client.readResource({ uri });
    const doc = JSON.parse((read.contents[0] as { text: string }).text) as { session: string; runs: Array<{ run: { id: string; state: string } }> };
    expect(doc.session).toBe(wrote.s.session);
    expect(doc.runs.map((r) => [r.run.id, r.run.state])).toEqual([
      [wrote.s.run, 'completed'],
      [ran.s.run, 'completed'],
    ]);
    // The calls' arguments and what the command printed are in the record.
    expect(JSON.stringify(doc.runs[0])).toContain('kept in the record');
    expect(JSON.stringify(doc.runs[1])).toContain('cat r.txt');
    const bad = await c.client.readResource({ uri: 'berth://session/ses_nope/record' }).catch((e: unknown) => e);
    expect((bad as McpError).data).toMatchObject({ code: 'session_not_found' });
  });

  it('saves the sandbox on demand with the snapshot tool: the result names the snapshot committed with the call, and a fork after that call has its workspace', async () => {
    const w = (world = await mcpWorld({ snapshotPolicy: 'on-demand' }));
    const c = await w.connect(w.envArgs());
    expect((await c.client.listTools()).tools.map((t) => t.name)).toContain('snapshot');
    const one = await call(c, 'write_file', { path: 'v.txt', content: 'one\n' });
    const session = one.s.session;
    const snap = await call(c, 'snapshot', {});
    expect(snap.isError, snap.text).toBe(false);
    expect(snap.s).toMatchObject({ session, tool: 'snapshot', status: 'ok' });
    const snapshotId = /^snapshot (snap_\w+) \(workspace (\S+)\)$/.exec(snap.text);
    expect(snapshotId, snap.text).not.toBeNull();
    // The snapshot is a record of the call's run, holding the workspace it names.
    const stored = await readStore(w.store, (s) => s.listSnapshots({ sessionId: session }));
    expect(stored.map((s) => [s.id, s.runId, s.workspaceDigest])).toEqual([[snapshotId![1], snap.s.run, snapshotId![2]]]);
    await call(c, 'write_file', { path: 'v.txt', content: 'two\n' });
    // Under on-demand only the demanded state can be forked: after the snapshot call, not after the last write.
    const forked = await call(c, 'fork', { after_call: 2 });
    const fork = (forked.structuredContent as { session: string; snapshot: string }).session;
    expect((forked.structuredContent as { snapshot: string }).snapshot).toBe(snapshotId![1]);
    expect((await call(c, 'read_file', { path: 'v.txt', session: fork })).text).toBe('one\n');
    expect((await call(c, 'read_file', { path: 'v.txt', session })).text).toBe('two\n');
    const late = await c.client.callTool({ name: 'fork', arguments: { after_call: 3, session } }).catch((e: unknown) => e);
    expect((late as McpError).data).toMatchObject({ code: 'fork_invalid' });
    expect((late as McpError).message).toContain('no snapshot call');
  });

  it("reads the session's workspace tree as a resource: the files as they are now (a name with a newline as one entry), through a recorded list_files call; search quotes such a name, or one with a colon, in its matches", async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const wrote = await call(c, 'write_file', { path: 'src/main.txt', content: 'twelve bytes' });
    const odd = await call(c, 'write_file', { path: 'two\nlines.txt', content: 'ab' });
    // A name with a newline is one quoted entry in every answer, not two lines a model reads as two names.
    expect(odd.text).toBe('wrote 2 bytes to "two\\nlines.txt"');
    // Before: ['hello.txt  20', 'src/', 'two', 'lines.txt  2'] (only the recursive listing quoted it).
    expect((await call(c, 'list_files', { path: '.' })).text.split('\n')).toEqual(['hello.txt  20', 'src/', '"two\\nlines.txt"  2']);
    const uri = `berth://session/${wrote.s.session}/workspace`;
    const templates = (await c.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    expect(templates).toEqual(['berth://session/{session}/record', 'berth://session/{session}/workspace']);
    const read = await c.client.readResource({ uri });
    expect(read.contents[0]).toMatchObject({ uri, mimeType: 'text/plain' });
    expect((read.contents[0] as { text: string }).text.split('\n')).toEqual(['hello.txt  20', 'src/', 'src/main.txt  12', '"two\\nlines.txt"  2']);
    // The read went through the session's sandbox as a call, so the record shows it.
    const runs = await readStore(w.store, (s) => s.listRuns());
    expect(runs).toHaveLength(4);
    const bad = await c.client.readResource({ uri: 'berth://session/ses_nope/workspace' }).catch((e: unknown) => e);
    expect((bad as McpError).data).toMatchObject({ code: 'session_not_found' });

    // search names each match's file unambiguously: a name holding a control character, a colon or a
    // double quote is a JSON string, so no name reads as a match in another file (or at another line).
    const made = await call(c, 'exec', { command: `d="$(printf 'x\\n/etc')" && mkdir -p "$d" && echo 'root:x:0:0:fake' > "$d/passwd:1:root:x:0:0:fake" && echo 'ab:1:c' > a:1:b.txt && echo 'Ab"' > '"q.txt'` });
    expect(made.isError, made.text).toBe(false);
    const search = async (args: Record<string, unknown>) => (await call(c, 'search', args)).text.split('\n').sort();
    // Before: ['/etc/passwd:1:root:x:0:0:fake:1:root:x:0:0:fake', 'x'] (a root line of /etc/passwd, and a file "x").
    expect(await search({ pattern: 'root:x', fixed: true })).toEqual(['"x\\n/etc/passwd:1:root:x:0:0:fake":1:root:x:0:0:fake']);
    expect(await search({ pattern: 'a[b]', ignore_case: true })).toEqual(['"\\"q.txt":1:Ab"', '"a:1:b.txt":1:ab:1:c', '"two\\nlines.txt":1:ab']);
    expect(await search({ pattern: '^[a-z]*:1:' })).toEqual(['"a:1:b.txt":1:ab:1:c']);
    expect(await search({ pattern: 'twelve', path: 'src' })).toEqual(['src/main.txt:1:twelve bytes']);
    // list_files quotes a name with a double quote too: a file literally named `"two\nlines.txt"` would
    // otherwise read as the quoted form of the name with a newline. Before: '"q.txt  4' unquoted.
    expect((await call(c, 'list_files', { path: '.' })).text.split('\n')).toContain('"\\"q.txt"  4');
  });

  it("counts an MCP call's sandbox use in the run's cost but no model request, since no model was asked", async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const ran = await call(c, 'exec', { command: 'true' });
    expect(ran.s.status).toBe('ok');
    const meters = await readStore(w.store, async (s) => (await s.sumCost({ runIds: [ran.s.run] })).map((t) => t.meter));
    expect(meters).toContain('exec.count');
    expect(meters).not.toContain('model.requests');
  });

  it('runs an MCP call as the run\'s root and the call\'s tool task alone: the root starts in the submit, commits the dictated call with its intent and spawns it in execute, with no generation task', async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const first = await call(c, 'exec', { command: 'true' });
    const runState = async (run: string) => (await readStore(w.store, (s) => s.getRun(run)))?.state;
    let state: string | undefined;
    // The answer comes at the result's commit, which also wakes the root; the root's end follows it.
    await until('the first call\'s run to end', () => state === 'completed', 60_000, async () => (state = await runState(first.s.run)));
    const before = await readStore(w.store, (s) => s.listCommits(first.s.session));
    const ran = await call(c, 'exec', { command: 'echo once' });
    expect(ran.text).toContain('once');
    state = undefined;
    await until('the call\'s run to end', () => state === 'completed', 60_000, async () => (state = await runState(ran.s.run)));
    const labels = (await readStore(w.store, (s) => s.listCommits(ran.s.session))).slice(before.length).map((l) => l.label);
    // The submission with the root's start; the dictated call with its intent and its task; the
    // effect's executing mark; the result with the root's wake; the root's end (after the answer).
    expect(labels).toEqual(['submit', 'phase.spawn:agent', 'effect.begin:agent-tool', 'phase.complete:agent-tool', 'phase.complete:agent']);
    const tasks = await readStore(w.store, async (s) => (await s.listTasks({ sessionId: ran.s.session })).filter((t) => t.runId === ran.s.run));
    expect(tasks.map((t) => t.kind).sort()).toEqual(['agent', 'agent-tool']);
    const root = tasks.find((t) => t.kind === 'agent')!;
    expect(tasks.find((t) => t.kind === 'agent-tool')!.parentId).toBe(root.id);
    expect(root.status).toBe('terminal');
    // The dictated call is in the record as the turn's model entry, so a later turn's context shows it.
    const model = await readStore(w.store, async (s) => (await s.listEntries(ran.s.session, { runId: ran.s.run })).filter((e) => e.kind === 'agent.model'));
    expect(model).toHaveLength(1);
    expect(model[0]!.body).toMatchObject({ turn: 1, toolCalls: [{ id: ran.s.call_id, name: 'exec' }] });
    const generationCommits = await readStore(w.store, async (s) => (await s.listCommitLog({ sessionId: ran.s.session })).filter((l) => l.label.endsWith(':agent-generate')).length);
    expect(generationCommits).toBe(0);
    const run = await readStore(w.store, (s) => s.getRun(ran.s.run));
    expect(run?.state).toBe('completed');
  });

  it("writes a large file's content into the tool task's row once, in its input: the committed intent's arguments stay in the effect record and the checkpoint only names it", async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const content = Array.from({ length: 20_000 }, (_, i) => `line ${i} of a large file\n`).join('');
    const wrote = await call(c, 'write_file', { path: 'large.txt', content });
    expect(wrote.s.status).toBe('ok');
    const tool = await readStore(w.store, async (s) => (await s.listTasks({ sessionId: wrote.s.session })).find((t) => t.runId === wrote.s.run && t.kind === 'agent-tool')!);
    // The checkpoint is what every later commit of the task rewrites with the row (SQLite writes a row whole).
    expect(JSON.stringify(tool.checkpoint).length).toBeLessThan(4096);
    const effect = await readStore(w.store, async (s) => (await s.listEffects({ runId: wrote.s.run }))[0]!);
    expect((effect.intent as { args: { content: string } }).args.content).toBe(content);
    const read = await call(c, 'read_file', { path: 'large.txt' });
    expect(read.text.length).toBeGreaterThan(content.length / 2);
    expect((await call(c, 'exec', { command: 'sha256sum large.txt' })).text).toContain(createHash('sha256').update(content).digest('hex'));
  });

  it('answers a call naming an unknown session with a typed error', async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const err = await c.client.callTool({ name: 'exec', arguments: { command: 'true', session: 'ses_nope' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).data).toMatchObject({ code: 'session_not_found', ids: { sessionId: 'ses_nope' } });
    expect((err as McpError).message).toContain('no session ses_nope');
  });

  it('refuses a call_id used again for another call with a typed error naming the first call, running nothing, and repeats the first call exactly', async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const args = { command: `timeout 20 busybox wget -q -O - http://localhost:${w.port}/dup && echo first-call`, call_id: 'dup-1' };
    const first = await call(c, 'exec', args);
    expect(first.text).toContain('first-call');
    for (const [tool, other] of [
      ['read_file', { path: 'hello.txt', call_id: 'dup-1' }],
      ['exec', { ...args, command: 'echo another' }],
    ] as const) {
      const err = await c.client.callTool({ name: tool, arguments: other }).catch((e: unknown) => e);
      expect(err, `${tool} ${JSON.stringify(other)}`).toBeInstanceOf(McpError);
      expect((err as McpError).data).toMatchObject({ code: 'call_id_reused', ids: { runId: first.s.run, sessionId: first.s.session } });
      expect((err as McpError).message).toContain('call_id dup-1 was first used for exec');
    }
    const again = await call(c, 'exec', args);
    expect(again.s).toMatchObject({ run: first.s.run, tool: 'exec', status: 'ok' });
    expect(again.text).toBe(first.text);
    expect(w.service.counts().dup).toBe(1);
    expect(await readStore(w.store, async (s) => (await s.listRuns()).length)).toBe(1);
  });
  it('answers a tools/call whose arguments are no object (an array, a string, null) or whose name is no string, and a resources/read whose uri is no string, with -32602 naming the field; an unknown tool with -32602 naming the tools; nothing runs', async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    const refused = async (method: string, params: Record<string, unknown>) => {
      const schema = method === 'tools/call' ? CallToolResultSchema : ReadResourceResultSchema;
      const err = await c.client.request({ method, params } as never, schema).catch((e: unknown) => e);
      expect(err, JSON.stringify(params)).toBeInstanceOf(McpError);
      return err as McpError;
    };
    for (const [args, kind] of [[[1, 2], 'an array'], ['ls', 'a string'], [null, 'null']] as const) {
      const err = await refused('tools/call', { name: 'exec', arguments: args });
      expect(err.code).toBe(-32602);
      expect(err.message).toBe(`MCP error -32602: invalid tools/call request: params.arguments must be a JSON object, not ${kind}`);
      expect(err.data).toEqual({ code: 'usage', field: 'params.arguments' });
    }
    const name = await refused('tools/call', { name: 42, arguments: {} });
    expect([name.code, name.message]).toEqual([-32602, 'MCP error -32602: invalid tools/call request: params.name must be a string, not a number']);
    const uri = await refused('resources/read', { uri: 42 });
    expect([uri.code, uri.message]).toEqual([-32602, 'MCP error -32602: invalid resources/read request: params.uri must be a string, not a number']);
    const unknown = await refused('tools/call', { name: 'deploy', arguments: {} });
    expect(unknown.code).toBe(-32602);
    expect(unknown.data).toMatchObject({ code: 'tool_unknown' });
    expect(unknown.message).toContain('no tool named "deploy"; the tools are exec, read_file');
    expect(await readStore(w.store, (s) => s.listRuns())).toEqual([]);
  });

  it('reports a read_file, a recursive list_files or a search refused for leaving the workspace (.., an absolute path, a symlink out; a search never reads through a symlink out) or for a name too long as status error with isError, in its answer and in the record; an exec that exits non-zero ran: status ok with isError', async () => {
    const w = (world = await mcpWorld());
    const c = await w.connect(w.envArgs());
    expect((await call(c, 'exec', { command: 'ln -s /etc esc' })).s.status).toBe('ok');
    const refusals: Array<[string, RegExp]> = [
      ['../etc/passwd', /leaves the workspace/],
      ['/etc/passwd', /leaves the workspace/],
      ['esc/passwd', /is a symlink to \/etc, outside the workspace/],
      ['x'.repeat(300), /has a name of 300 bytes; a file name is at most 255 bytes/],
    ];
    for (const [path, why] of refusals) {
      const r = await call(c, 'read_file', { path });
      expect([r.s.status, r.isError], path).toEqual(['error', true]);
      expect(r.text, path).toMatch(why);
      const entries = await readStore(w.store, (s) => s.listEntries(r.s.session, { runId: r.s.run }));
      expect(entries.find((e) => e.kind === 'agent.tool_result')?.body, path).toMatchObject({ status: 'error', isError: true });
    }
    // list_files (recursive) and search walk the tree with a command of their own: confined as read_file is.
    expect((await call(c, 'exec', { command: 'ln -s /etc/passwd pw' })).s.status).toBe('ok');
    const walks: Array<[string, Record<string, unknown>]> = [
      ['list_files', { recursive: true }],
      ['search', { pattern: 'root' }],
    ];
    for (const [tool, args] of walks) {
      for (const [path, why] of [
        ['../..', /^error: path "\.\.\/\.\." leaves the workspace \/\S+ \(it resolves to \/\)$/],
        ['/etc', /^error: path "\/etc" leaves the workspace \/\S+$/],
        ['esc', /^error: path "esc" leaves the workspace \/\S+ \(it resolves to \/etc\)$/],
        ['nope', /^error: nope does not exist in the sandbox$/],
      ] as const) {
        const r = await call(c, tool, { ...args, path });
        expect([r.s.status, r.isError], `${tool} ${path}: ${r.text.slice(0, 300)}`).toEqual(['error', true]);
        expect(r.text, `${tool} ${path}`).toMatch(why);
      }
    }
    // A symlink inside the workspace to a file outside it is listed, never searched through.
    const tree = await call(c, 'list_files', { recursive: true });
    expect(tree.text.split('\n')).toEqual(expect.arrayContaining(['hello.txt  20', 'pw  11']));
    const searched = await call(c, 'search', { pattern: 'root:' });
    expect([searched.s.status, searched.text]).toEqual(['ok', 'no matches']);
    expect((await call(c, 'search', { pattern: 'from the' })).text).toBe('hello.txt:1:hello from the host');
    const failed = await call(c, 'exec', { command: 'exit 3' });
    expect([failed.s.status, failed.isError]).toEqual(['ok', true]);
    // A NUL byte no process argument can hold: refused before it runs, not `exec /bin/sh: invalid argument` as a command that failed.
    const nul = await call(c, 'exec', { command: 'echo a\u0000b' });
    expect([nul.s.status, nul.isError, nul.text]).toEqual(['invalid', true, 'error: invalid arguments for exec: command: a shell command cannot hold a NUL byte.']);
  });

  it('tells a client whose server finds its session held by another live server who holds it and to wait (a typed, retryable error, nothing run), and tells berth chat that a berth mcp session takes calls from an MCP client, not messages', async () => {
    const w = (world = await mcpWorld());
    const first = await w.connect(w.envArgs());
    const wrote = await call(first, 'write_file', { path: 'a.txt', content: 'a\n' });
    const session = wrote.s.session;
    const second = await w.connect(['--session', session]);
    const err = await second.client.callTool({ name: 'exec', arguments: { command: 'true' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    const refused = err as McpError;
    expect(refused.code).toBe(-32602);
    expect(refused.data).toMatchObject({ code: 'session_served_elsewhere', retryable: true, ids: { sessionId: session }, details: { owner: { pid: first.pid } } });
    expect(refused.message).toContain(`session ${session} is served by another live Berth process: host `);
    expect(refused.message).toContain(`pid ${first.pid}`);
    expect(refused.message).toContain('Wait until that process ends');
    expect(refused.message).not.toContain('--take-over');
    expect((await readStore(w.store, (s) => s.listRuns())).map((r) => r.id)).toEqual([wrote.s.run]);
    await first.close();
    await second.close();
    const chat = spawnSync(process.execPath, [await bundledCli(), 'chat', session, 'hello there', '--store', w.store], { encoding: 'utf8', env: { ...process.env, BERTH_OPERATOR: 'tester' } });
    expect(chat.status, chat.stderr).toBe(1);
    expect(chat.stderr).toContain(`session_caller_driven: session ${session} was created by berth mcp`);
    expect(chat.stderr).toContain(`berth mcp --session ${session}`);
    expect(chat.stderr).not.toContain('api_key_missing');
    expect(await readStore(w.store, async (s) => (await s.listRuns()).length)).toBe(1);
  });
});
