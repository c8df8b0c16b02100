import { afterEach, describe, expect, it } from 'vitest';
import { continueSession, ENTRY, sessionSandboxDocId, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { readContainerFile } from '../support/agent-observe';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

const script = [
  { toolCalls: [{ name: 'write_file', arguments: { path: 'notes/a.txt', content: 'kept across hosts\n' } }] },
  { content: 'written' },
  { toolCalls: [{ name: 'read_file', arguments: { path: 'notes/a.txt' } }] },
  { content: 'read it' },
];

async function pointer(w: AgentWorld, sessionId: string) {
  const doc = await w.rt.store.getDocument(sessionSandboxDocId(sessionId));
  return doc ? w.rt.documents.rebuild(doc) as { leaseId: string; snapshotId: string | null; workspaceDigest: string } : undefined;
}

const chat = (w: AgentWorld, sessionId: string) => continueSession({ ...w.rt, toolNames: [...w.rt.agent.tools.keys()] }, { sessionId, message: 'read it back' });

describe('agent session sandbox on resume', { timeout: 180_000 }, () => {
  it('restores a session whose container is gone from the snapshot of its newest tool result, and continues', async () => {
    w = await agentWorld(script);
    const { run } = await w.start('write a note', { snapshot: 'after-each-step' });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const before = (await pointer(w, run.sessionId))!;
    const snaps = await w.rt.store.listSnapshots({ sessionId: run.sessionId });
    expect(snaps.map((s) => s.checkpoint)).toEqual(['agent:start', 'tool:call_0_0']);
    const lease = await w.rt.store.getLease(before.leaseId);
    await w.docker.getContainer(lease!.containerId).remove({ force: true });
    const rt = await w.restart();
    const next = await chat(w, run.sessionId);
    expect((await rt.kernel.waitForRun(next.run.id)).state).toBe('completed');
    const after = (await pointer(w, run.sessionId))!;
    expect(after.leaseId).not.toBe(before.leaseId);
    expect(after.snapshotId).toBe(snaps[1]!.id);
    const read = (await rt.store.listEntries(run.sessionId, { runId: next.run.id })).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
    expect(read[0]).toMatchObject({ status: 'ok', content: 'kept across hosts\n' });
  });

  it('refuses to continue a session whose workspace changed outside the run, naming the digests', async () => {
    w = await agentWorld(script);
    const { run } = await w.start('write a note');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const p = (await pointer(w, run.sessionId))!;
    const lease = await w.rt.store.getLease(p.leaseId);
    const ex = await w.docker.getContainer(lease!.containerId).exec({ Cmd: ['sh', '-c', 'echo tampered > /workspace/notes/a.txt'], User: '1000:1000' });
    await ex.start({});
    await new Promise((r) => setTimeout(r, 300));
    expect(await readContainerFile(w.docker, lease!.containerId, '/workspace/notes/a.txt')).toBe('tampered\n');
    const rt = await w.restart();
    const next = await chat(w, run.sessionId);
    const done = await rt.kernel.waitForRun(next.run.id);
    expect(done.state).toBe('failed');
    const root = await rt.store.getTask(next.run.rootTaskId!);
    expect(root?.error).toMatchObject({ code: 'sandbox_unusable', message: expect.stringContaining('workspace digest mismatch') });
    expect(root?.error?.message).toContain('./notes/a.txt');
  });
});
