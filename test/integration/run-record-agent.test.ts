import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decideApproval, listApprovals } from '../../host/agent';
import { checkRecord, exportRun, RunRecordSchema } from '../../host/record';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('the run record of an agent run', { timeout: 180_000 }, () => {
  it('says, from the exported file alone, who approved which tool call with which scope digest, what ran once and which model answered', async () => {
    w = await agentWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo ran >> /tmp/approved.log; cat /tmp/approved.log' } }] },
      { content: 'finished' },
    ]);
    const { run } = await w.start('run it after approval', { settings: { requireApproval: ['exec'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    const [pending] = await listApprovals(w.rt.store, run.id);
    await decideApproval(w.rt.store, { runId: run.id, id: pending!.approvalId, decision: 'approve', digest: pending!.digest, actor: 'user:reviewer', now: Date.now() });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const file = join(w.dir, 'agent-record.json');
    writeFileSync(file, (await exportRun(w.rt.store, run.id, Date.now())).text);

    // From here on only the file is read.
    const r = RunRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    expect(r.job.objective).toEqual({ message: 'run it after approval' });
    expect(r.approvals).toEqual([
      expect.objectContaining({ tool: 'exec', toolCallId: 'call_0_0', decision: 'approved', approver: 'user:reviewer', scopeDigest: pending!.digest }),
    ]);
    expect(r.approvals[0]!.expiresAt).toBeGreaterThan(r.approvals[0]!.requestedAt);
    expect(r.transitions.map((t) => t.to)).toEqual(['admitted', 'running', 'awaiting_approval', 'running', 'completed']);
    const execEffects = r.effects.filter((e) => e.kind === 'tool.exec');
    expect(execEffects).toHaveLength(1);
    expect(execEffects[0]).toMatchObject({ status: 'confirmed', attempts: 1, reconciliation: 'receipt' });
    expect(r.run.models).toEqual(['scripted-1']);
    expect(r.run.promptDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(r.isolation.network.mode).toBe('none');
    expect(r.unresolved).toEqual([]);
    // judged by an operator only; nobody has yet; an agent run declares no artifacts
    expect(r.job.acceptanceRule).toEqual({ kind: 'manual' });
    expect(r.acceptance).toEqual({ verdict: r.run.state === 'completed' ? 'pending' : 'none', decisions: [] });
    expect(r.artifacts).toMatchObject({ recorded: false });
    expect(Object.keys(r.cost.summary.tokens)).toEqual(['scripted-1']);
    expect(checkRecord(r)).toEqual([]);
  });
});
