import { afterEach, describe, expect, it } from 'vitest';
import { decideApproval, ENTRY, listApprovals, type ToolResultEntry } from '../../host/agent';
import { isBerthError } from '../../host/errors';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import type { ScriptedTurn } from '../support/model-server';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

const script: ScriptedTurn[] = [
  { toolCalls: [{ name: 'exec', arguments: { command: 'echo ran >> /tmp/approved.log; cat /tmp/approved.log' } }] },
  { content: 'finished' },
];

async function awaiting(w: AgentWorld, ttlMs?: number) {
  const { run } = await w.start('run it after approval', { settings: { requireApproval: ['exec'], ...(ttlMs ? { approvalTtlMs: ttlMs } : {}) } });
  await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
  return run;
}

const results = async (w: AgentWorld, sessionId: string) => (await w.rt.store.listEntries(sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (isBerthError(err)) return err.code;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('approvals', { timeout: 180_000 }, () => {
  it('waits for an approval across a host restart, then runs the call once and completes', async () => {
    w = await agentWorld(script);
    const run = await awaiting(w);
    const [pending] = await listApprovals(w.rt.store, run.id);
    expect(pending).toMatchObject({ toolCallId: 'call_0_0', tool: 'exec', state: 'pending', digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    expect(await w.rt.store.listEffects({ runId: run.id })).toEqual([]);
    const rt = await w.restart();
    expect((await rt.store.getRun(run.id))?.state).toBe('awaiting_approval');
    await decideApproval(rt.store, { runId: run.id, id: pending!.approvalId, decision: 'approve', digest: pending!.digest, actor: 'user:tester', now: Date.now() });
    expect((await rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const [r] = await results(w, run.sessionId);
    expect(r).toMatchObject({ status: 'ok', content: expect.stringContaining('ran') });
    expect(r!.content.match(/^ran$/gm)).toHaveLength(1);
    expect((await rt.store.listRunTransitions(run.id)).map((t) => t.to)).toEqual(['admitted', 'running', 'awaiting_approval', 'running', 'completed']);
    expect((await listApprovals(rt.store, run.id))[0]).toMatchObject({ state: 'approved', by: 'user:tester' });
  });

  it('refuses an approval for a different digest and keeps the call waiting', async () => {
    w = await agentWorld(script);
    const run = await awaiting(w);
    const code = await refusal(decideApproval(w.rt.store, { runId: run.id, id: 'call_0_0', decision: 'approve', digest: `sha256:${'0'.repeat(64)}`, actor: 'user:tester', now: Date.now() }));
    expect(code).toBe('approval_digest_mismatch');
    expect((await w.rt.store.getRun(run.id))?.state).toBe('awaiting_approval');
    expect((await listApprovals(w.rt.store, run.id))[0]?.state).toBe('pending');
    await decideApproval(w.rt.store, { runId: run.id, id: 'call_0_0', decision: 'approve', actor: 'user:tester', now: Date.now() });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
  });

  it('never runs a denied call, tells the model, and refuses a later approval of it', async () => {
    w = await agentWorld(script);
    const run = await awaiting(w);
    await decideApproval(w.rt.store, { runId: run.id, id: 'call_0_0', decision: 'deny', actor: 'user:tester', now: Date.now() });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    expect(await results(w, run.sessionId)).toEqual([expect.objectContaining({ status: 'denied', content: expect.stringContaining('user:tester denied it') })]);
    expect(await w.rt.store.listEffects({ runId: run.id })).toEqual([]);
    expect(w.model.requests.at(-1)!.body.messages.find((m) => m.role === 'tool')?.content).toContain('[denied]');
    expect(await refusal(decideApproval(w.rt.store, { runId: run.id, id: 'call_0_0', decision: 'approve', actor: 'user:tester', now: Date.now() }))).toBe('approval_not_pending');
  });

  it('expires an undecided request by its durable timer, as not approved, and never turns the expiry into an approval', async () => {
    w = await agentWorld(script);
    const run = await awaiting(w, 1_000);
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    expect(await results(w, run.sessionId)).toEqual([expect.objectContaining({ status: 'expired' })]);
    expect((await listApprovals(w.rt.store, run.id))[0]).toMatchObject({ state: 'expired', by: 'policy:approval-expiry' });
    expect(await refusal(decideApproval(w.rt.store, { runId: run.id, id: 'call_0_0', decision: 'approve', actor: 'user:tester', now: Date.now() }))).toBe('approval_not_pending');
    expect(await w.rt.store.listEffects({ runId: run.id })).toEqual([]);
  });

  it('refuses an approval given after the expiry time even before the timer has fired', async () => {
    w = await agentWorld(script);
    const run = await awaiting(w, 60_000);
    const [p] = await listApprovals(w.rt.store, run.id);
    expect(await refusal(decideApproval(w.rt.store, { runId: run.id, id: 'call_0_0', decision: 'approve', actor: 'user:tester', now: p!.expiresAt + 1 }))).toBe('approval_expired');
    expect((await w.rt.store.getRun(run.id))?.state).toBe('awaiting_approval');
  });
});
