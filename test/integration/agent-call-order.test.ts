import { afterEach, describe, expect, it } from 'vitest';
import { decideApproval, ENTRY, listApprovals, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

const results = async (w: AgentWorld, sessionId: string) => (await w.rt.store.listEntries(sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);

describe('the calls of one turn', { timeout: 180_000 }, () => {
  // Seven calls: more than the kernel's four phase slots, so later calls queue behind earlier ones.
  it("run in the model's order: each call sees what the calls before it did, whatever phases they go through", async () => {
    w = await agentWorld([
      {
        toolCalls: [
          { name: 'write_file', arguments: { path: 'notes/a.txt', content: 'one\n' } },
          { name: 'exec', arguments: { command: 'cat notes/a.txt && echo two >> notes/a.txt' } },
          { name: 'edit', arguments: { path: 'notes/a.txt', old_string: 'two', new_string: 'three' } },
          { name: 'read_file', arguments: { path: 'notes/a.txt' } },
          { name: 'write_file', arguments: { path: 'notes/b.txt', content: 'bee\n' } },
          { name: 'list_files', arguments: { path: 'notes' } },
          { name: 'exec', arguments: { command: 'cat notes/a.txt notes/b.txt' } },
        ],
      },
      { content: 'done' },
    ]);
    const { run } = await w.start('write, then use what was written');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const r = await results(w, run.sessionId);
    // Committed in call order: each call ran only after the one before it had finished.
    expect(r.map((x) => [x.toolCallId, x.status])).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => [`call_0_${i}`, 'ok']));
    expect(r[1]!.content).toContain('one');
    expect(r[3]!.content).toMatch(/one\s+three/);
    expect(r[5]!.content).toContain('b.txt');
    expect(r[6]!.content).toMatch(/one\s+three\s+bee/);
  });

  it('do not wait for an earlier call that waits for an approval: the later ones run, the approved one after', async () => {
    w = await agentWorld([
      {
        toolCalls: [
          { name: 'write_file', arguments: { path: 'gated.txt', content: 'gated\n' } },
          { name: 'exec', arguments: { command: 'echo free > free.txt; ls' } },
        ],
      },
      { content: 'done' },
    ]);
    const { run } = await w.start('one gated call, one free', { settings: { requireApproval: ['write_file'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    // The free call ran while the gated one waits (a wait can last hours; it holds nothing).
    for (let i = 0; i < 600 && (await results(w, run.sessionId)).length === 0; i++) await new Promise((res) => setTimeout(res, 50));
    expect((await results(w, run.sessionId)).map((x) => [x.toolCallId, x.status])).toEqual([['call_0_1', 'ok']]);
    const [pending] = await listApprovals(w.rt.store, run.id);
    await decideApproval(w.rt.store, { runId: run.id, id: pending!.approvalId, decision: 'approve', digest: pending!.digest, actor: 'user:tester', now: Date.now() });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    expect((await results(w, run.sessionId)).map((x) => [x.toolCallId, x.status])).toEqual([['call_0_1', 'ok'], ['call_0_0', 'ok']]);
  });
});
