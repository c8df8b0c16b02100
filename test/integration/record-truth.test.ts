import { afterEach, describe, expect, it } from 'vitest';
import { lastJson } from '../support/plan-fixture';
import { cliWorld, startInBackground, type CliWorld } from '../support/agent-cli-world';

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

async function waitForState(w: CliWorld, states: string[]): Promise<string | undefined> {
  for (let i = 0; i < 600; i++) {
    const id = await w.read(async (s) => (await s.listRuns({ states: states as never }))[0]?.id).catch(() => undefined);
    if (id) return id;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}

interface Exported {
  run: { state: string };
  approvals: Array<{ approvalId: string; decision: string; approver: string | null; decidedAt: number | null }>;
  unresolved: Array<{ kind: string; id: string }>;
}

describe('the record tells the truth and berth check judges it', { timeout: 240_000 }, () => {
  it('a run cancelled while a call waits for approval records the approval closed by the cancel, lists nothing unresolved, and berth approve says why it is closed', async () => {
    w = await cliWorld([{ toolCalls: [{ name: 'exec', arguments: { command: 'echo never-approved' } }] }, { content: 'not reached' }]);
    const host = await startInBackground(w, w.agentArgs('run it', ['--require-approval', 'exec', '--request-id', 'cancel-approval']));
    const runId = await waitForState(w, ['awaiting_approval']);
    expect(runId, host.stderr()).toBeDefined();
    const cancel = await w.cli(['cancel', runId!]);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(await waitForState(w, ['cancelled']), host.stderr()).toBe(runId);
    await host.exited;

    const exported = await w.cli(['export', runId!]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as Exported;
    expect(record.run.state).toBe('cancelled');
    expect(record.approvals).toHaveLength(1);
    // Before: `pending` and listed under `unresolved` on a cancelled run.
    expect(record.approvals[0]).toMatchObject({ decision: 'cancelled', approver: 'user:tester' });
    expect(record.approvals[0]!.decidedAt).toEqual(expect.any(Number));
    expect(record.unresolved.filter((u) => u.kind === 'approval')).toEqual([]);

    const check = await w.cli(['check', runId!, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);

    const late = await w.cli(['approve', runId!, 'call_0_0', '--json']);
    expect(late.code).toBe(1);
    expect(late.stderr).toContain('approval_not_pending');
    expect(late.stderr).toContain('closed when the run was cancelled');
    const show = await w.cli(['show', runId!, '--json']);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.stringify(lastJson<unknown>(show))).not.toContain('"pending"');
  });

  it('an agent that runs the same never command in two turns has two effects, each done once, and berth check passes', async () => {
    const command = 'echo deployed >> /tmp/deploys.log; wc -l < /tmp/deploys.log';
    w = await cliWorld([
      { toolCalls: [{ name: 'exec', arguments: { command } }] },
      { toolCalls: [{ name: 'exec', arguments: { command } }] },
      { content: 'Deployed twice, as asked.' },
    ]);
    const end = await w.cli([...w.agentArgs('deploy twice', ['--request-id', 'twice']), '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string; state: string } }>(end).run.id;
    const effects = await w.read((s) => s.listEffects({ runId }));
    expect(effects.map((e) => [e.kind, e.replay, e.status])).toEqual([['tool.exec', 'never', 'confirmed'], ['tool.exec', 'never', 'confirmed']]);
    // Before: never_once keyed on kind and intent and called these two calls one action done twice.
    const check = await w.cli(['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });
});
