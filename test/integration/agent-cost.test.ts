import { afterEach, describe, expect, it } from 'vitest';
import { decideApproval, ENTRY, listApprovals } from '../../host/agent';
import { acceptanceOf } from '../../host/acceptance';
import { runCost } from '../../host/cost';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('agent run cost and acceptance', { timeout: 180_000 }, () => {
  it('counts exactly the tokens the model server reported, by model, with cached prompt tokens, and waits for a manual acceptance', async () => {
    w = await agentWorld([
      { content: 'Listing.', toolCalls: [{ name: 'exec', arguments: { command: 'ls' } }] },
      { content: 'Done listing.' },
    ]);
    const { run } = await w.start('list the workspace');
    const done = await w.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('completed');
    const reported = w.model.reported;
    expect(reported).toHaveLength(2);
    const sum = (k: 'prompt_tokens' | 'completion_tokens') => reported.reduce((n, u) => n + u[k], 0);
    const cached = reported.reduce((n, u) => n + (u.prompt_tokens_details?.cached_tokens ?? 0), 0);
    expect(cached).toBeGreaterThan(0);
    const cost = await runCost(w.rt.store, run.id, Date.now());
    expect(cost.tokens).toEqual({ 'scripted-1': { requests: 2, prompt: sum('prompt_tokens'), completion: sum('completion_tokens'), cached } });
    // The exec tool ran in the sandbox: its CPU time is measured too.
    expect(cost.cpuSeconds).toBeGreaterThan(0);
    // Agent runs default to manual acceptance: completed, not yet judged.
    expect((await acceptanceOf(w.rt.store, done)).state).toBe('pending');
  });

  it('counts the time a tool call waited for its approval, from the request to the decision as recorded', async () => {
    w = await agentWorld([{ toolCalls: [{ name: 'exec', arguments: { command: 'echo ran' } }] }, { content: 'finished' }]);
    const { run } = await w.start('run it after approval', { settings: { requireApproval: ['exec'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    // While it waits, the open approval counts up to now.
    await new Promise((r) => setTimeout(r, 300));
    expect((await runCost(w.rt.store, run.id, Date.now())).approvalWaitSeconds).toBeGreaterThanOrEqual(0.3);
    const [pending] = await listApprovals(w.rt.store, run.id);
    await decideApproval(w.rt.store, { runId: run.id, id: pending!.approvalId, decision: 'approve', digest: pending!.digest, actor: 'user:tester', now: Date.now() });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const entries = await w.rt.store.listEntries(run.sessionId);
    const asked = entries.find((e) => e.kind === ENTRY.approvalRequested)!.at;
    const decided = entries.find((e) => e.kind === ENTRY.approvalDecided)!.at;
    expect(decided - asked).toBeGreaterThanOrEqual(300);
    expect((await runCost(w.rt.store, run.id, Date.now() + 60_000)).approvalWaitSeconds).toBeCloseTo((decided - asked) / 1000, 6);
  });
});
