import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, OpenAIProvider, Runner } from '@openai/agents';
import { afterEach, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../environment';
import { Berth } from '../../host';
import { BerthEditor, BerthShell, berthFunctionTools } from '../../host/integrations/openai-agents';
import { McpSessions } from '../../host/mcp';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { startModelServer, type ModelServer } from '../support/model-server';
import { removeHostArtifacts } from '../support/plan-fixture';

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.reverse()) await f().catch(() => {});
  cleanup = [];
});

/** An in-process host over a fresh store and berth/tiny, with the caller-driven sessions the adapters use. */
async function world() {
  const docker = await requireEngine();
  const image = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-agents-'));
  const hostId = `agentstest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 60 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { policy: never }\n`);
  const environment = (await loadEnvironment(join(dir, 'env.yaml'))) as Awaited<ReturnType<typeof loadEnvironment>> & { image: { digest: string } };
  const berth = await Berth.open({ store: join(dir, 'berth.db'), hostId });
  const sessions = new McpSessions({ berth, environment });
  cleanup.push(async () => {
    await sessions.close();
    await berth.close();
    await removeHostArtifacts(docker, hostId);
    rmSync(dir, { recursive: true, force: true });
  });
  return { berth, sessions };
}

describe('the @openai/agents adapters over a Berth session', { timeout: 600_000 }, () => {
  it('lets the real Runner write a file and run a command through the function tools, every call a run of the session', async () => {
    const { berth, sessions } = await world();
    const model: ModelServer = await startModelServer([
      { toolCalls: [{ id: 'call_w', name: 'write_file', arguments: { path: 'hello.sh', content: 'echo from-the-sandbox\n' } }] },
      { toolCalls: [{ id: 'call_x', name: 'exec', arguments: { command: 'sh hello.sh' } }] },
      { content: 'all done' },
    ]);
    cleanup.push(() => model.close());
    const agent = new Agent({ name: 'coder', instructions: 'Use the tools.', model: 'scripted-1', tools: berthFunctionTools(sessions) });
    const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: 'sk-test', baseURL: model.url, useResponses: false }), tracingDisabled: true });
    const result = await runner.run(agent, 'write and run hello.sh');
    expect(result.finalOutput).toBe('all done');
    // The model read the command's real output from the sandbox.
    const toolMessages = model.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(toolMessages.join('\n')).toContain('from-the-sandbox');
    // The record: one completed run per call, keyed by the model's call id.
    // A call is answered at its result's commit; its run's end (the root's two commits) follows.
    let runs = await berth.list({ sessionId: sessions.sessionId! });
    for (const end = Date.now() + 60_000; runs.some((r) => r.state === 'running') && Date.now() < end; runs = await berth.list({ sessionId: sessions.sessionId! })) await new Promise((r) => setTimeout(r, 100));
    expect(runs.map((r) => r.state)).toEqual(['completed', 'completed']);
    for (const [i, id] of ['call_w', 'call_x'].entries()) expect((await berth.store.findSubmission(`mcp:${id}`))?.runId).toBe(runs[i]!.id);
  });

  it('runs Shell commands and applies Editor diffs in the session workspace', async () => {
    const { sessions } = await world();
    const shell = new BerthShell(sessions);
    const editor = new BerthEditor(sessions);
    const ran = await shell.run({ commands: ['echo out; echo err >&2', 'exit 3'] });
    expect(ran.output).toEqual([
      { stdout: 'out', stderr: 'err', outcome: { type: 'exit', exitCode: 0 } },
      { stdout: '', stderr: '', outcome: { type: 'exit', exitCode: 3 } },
    ]);
    expect(await editor.createFile({ type: 'create_file', path: 'list.txt', diff: '+one\n+two\n' })).toMatchObject({ status: 'completed' });
    expect(await editor.updateFile({ type: 'update_file', path: 'list.txt', diff: '@@\n one\n-two\n+three\n' })).toMatchObject({ status: 'completed' });
    expect((await shell.run({ commands: ['cat list.txt'] })).output[0]!.stdout).toBe('one\nthree');
    expect(await editor.updateFile({ type: 'update_file', path: 'list.txt', diff: '@@\n nothing-like-this\n-x\n+y\n' })).toMatchObject({ status: 'failed' });
    expect(await editor.deleteFile({ type: 'delete_file', path: 'list.txt' })).toMatchObject({ status: 'completed' });
    expect((await shell.run({ commands: ['test -e list.txt'] })).output[0]!.outcome).toEqual({ type: 'exit', exitCode: 1 });
  });
});
