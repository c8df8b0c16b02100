import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { ENTRY, type ToolResultEntry } from '../../host/agent';
import { runNode } from '../support/child';
import { bundledCli, lastJson } from '../support/plan-fixture';
import { cliWorld, SECRET, startInBackground, type CliWorld } from '../support/agent-cli-world';
import { requireEngine } from '../support/docker-engine';

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('berth agent, chat, approve and deny', { timeout: 180_000 }, () => {
  it('runs an agent task with live output, never storing or printing the API key', async () => {
    w = await cliWorld([
      { content: 'Reading the file.', toolCalls: [{ name: 'read_file', arguments: { path: 'hello.txt' } }] },
      { content: 'It says hello from the host.' },
    ]);
    const end = await w.cli([...w.agentArgs('what does hello.txt say?'), '--json']);
    expect(end.code).toBe(0);
    const events = end.stdout.trim().split('\n').filter((l) => l.startsWith('{"event"')).map((l) => JSON.parse(l) as { event: string; kind?: string; state?: string });
    expect(events.filter((e) => e.event === 'entry').map((e) => e.kind)).toEqual([ENTRY.user, ENTRY.model, ENTRY.toolResult, ENTRY.model]);
    expect(events.filter((e) => e.event === 'run').map((e) => e.state)).toEqual(['admitted', 'running', 'completed']);
    const final = lastJson<{ run: { state: string }; answer: string }>(end);
    expect(final).toMatchObject({ run: { state: 'completed' }, answer: 'It says hello from the host.' });
    expect(w.model.requests[0]!.authorization).toBe(`Bearer ${SECRET}`);
    expect(end.stdout + end.stderr).not.toContain(SECRET);
    expect(readFileSync(w.store).includes(SECRET)).toBe(false);
    const wal = `${w.store}-wal`;
    expect(readFileSync(wal, { flag: 'a+' }).includes(SECRET)).toBe(false);
  });

  it('continues a session with berth chat, once per request id, with the whole conversation in context', async () => {
    w = await cliWorld([{ content: 'First answer.' }, { content: 'Second answer.' }]);
    const first = lastJson<{ run: { sessionId: string } }>(await w.cli([...w.agentArgs('first question'), '--json']));
    const session = first.run.sessionId;
    const a = await w.cli(['chat', session, 'second question', '--request-id', 'chat-1', '--json']);
    const b = await w.cli(['chat', session, 'second question', '--request-id', 'chat-1', '--json']);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    const ra = lastJson<{ run: { id: string }; answer: string }>(a);
    expect(ra.answer).toBe('Second answer.');
    expect(lastJson<{ run: { id: string } }>(b).run.id).toBe(ra.run.id);
    expect(await w.read((s) => s.listRuns({ sessionId: session }))).toHaveLength(2);
    expect(w.model.requests).toHaveLength(2);
    expect(w.model.requests[1]!.body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it('keeps a call waiting for approval across a killed host, refuses a wrong digest, and runs it once after approval and resume', async () => {
    w = await cliWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo once >> /tmp/approved.log; cat /tmp/approved.log' } }] },
      { content: 'Done after approval.' },
    ]);
    const host = await startInBackground(w, [...w.agentArgs('run it', ['--require-approval', 'exec', '--request-id', 'approval-run'])]);
    let runId: string | undefined;
    for (let i = 0; i < 300 && !runId; i++) {
      await new Promise((r) => setTimeout(r, 100));
      runId = await w.read(async (s) => (await s.listRuns({ states: ['awaiting_approval'] }))[0]?.id).catch(() => undefined);
    }
    expect(runId, host.stderr()).toBeDefined();
    expect(host.child.exitCode, `the host ended on its own:\n${host.stderr()}`).toBeNull();
    host.child.kill('SIGKILL');
    await host.exited;
    const wrong = await w.cli(['approve', runId!, 'call_0_0', '--digest', `sha256:${'1'.repeat(64)}`, '--json']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('approval_digest_mismatch');
    const ok = await w.cli(['approve', runId!, 'call_0_0', '--json']);
    expect(ok.code).toBe(0);
    expect(lastJson<{ approval: { state: string; by: string } }>(ok).approval).toMatchObject({ state: 'approved', by: 'user:tester' });
    expect(lastJson<{ owner: { live: boolean } }>(ok).owner.live).toBe(false);
    // Debug logs and a bounded wait: if resume ever hangs, the failure shows where, with the store's view.
    const resumed = await runNode(await bundledCli(), ['resume', runId!, '--store', w.store], { BERTH_HOST_ID: w.hostId, BERTH_OPERATOR: 'tester', TEST_MODEL_KEY: SECRET, BERTH_LOG_LEVEL: 'debug' }, 120_000);
    const state = resumed.code === 0 ? '' : JSON.stringify(await w.read(async (s) => ({ run: await s.getRun(runId!), tasks: await s.listTasks({ runId: runId! }), transitions: await s.listRunTransitions(runId!) })));
    expect(resumed.code, `resume ended ${resumed.code ?? resumed.signal}\n${resumed.stderr.slice(-6000)}\n${state}`).toBe(0);
    // berth resume of an agent run shows the conversation and tool calls as berth agent does, not a plan's (empty) step table.
    expect(resumed.stderr).toContain('→ exec');
    expect(resumed.stdout).toContain('Done after approval.');
    expect(resumed.stdout).not.toContain('STEP');
    const results = await w.read(async (s) => (await s.listEntries((await s.getRun(runId!))!.sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry));
    expect(results).toHaveLength(1);
    expect(results[0]!.content.match(/^once$/gm)).toHaveLength(1);
    const denyLate = await w.cli(['deny', runId!, 'call_0_0']);
    expect(denyLate.code).toBe(1);
    expect(denyLate.stderr).toContain('approval_not_pending');
  });

  it('a host whose agent run another berth process takes over says so and exits 4; approve while a host drives takes no ownership and the driving host finishes the run', async () => {
    w = await cliWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo ran >> /tmp/approved.log; cat /tmp/approved.log' } }] },
      { content: 'Done after approval.' },
    ]);
    const first = await startInBackground(w, [...w.agentArgs('run it', ['--require-approval', 'exec', '--request-id', 'lost-right'])]);
    let runId: string | undefined;
    for (let i = 0; i < 300 && !runId; i++) {
      await new Promise((r) => setTimeout(r, 100));
      runId = await w.read(async (s) => (await s.listRuns({ states: ['awaiting_approval'] }))[0]?.id).catch(() => undefined);
    }
    expect(runId, first.stderr()).toBeDefined();
    // A second host on the same store is refused while the first lives, and takes the run over with --take-over.
    const refused = await w.cli(['resume', runId!]);
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr).toContain('run_owned');
    const second = await startInBackground(w, ['resume', runId!, '--take-over']);
    const firstEnd = await Promise.race([first.exited, new Promise<'still running'>((r) => setTimeout(() => r('still running'), 60_000))]);
    if (firstEnd === 'still running') first.child.kill('SIGKILL');
    expect(firstEnd, `the first host, its run taken over:\n${first.stderr()}`).toBe(4);
    expect(first.stderr()).toContain('execution_right_lost');
    expect(first.stderr()).toContain(`berth resume ${runId}`);
    // approve commits its decision without owning the run: the resuming host keeps it and finishes the run.
    const ok = await w.cli(['approve', runId!, 'call_0_0', '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(lastJson<{ owner: { live: boolean; pid: number } }>(ok).owner).toMatchObject({ live: true, pid: second.child.pid });
    const secondEnd = await Promise.race([second.exited, new Promise<'still running'>((r) => setTimeout(() => r('still running'), 120_000))]);
    if (secondEnd === 'still running') second.child.kill('SIGKILL');
    expect(secondEnd, second.stderr()).toBe(0);
    expect((await w.read((s) => s.getRun(runId!)))!.state).toBe('completed');
    const results = await w.read(async (s) => (await s.listEntries((await s.getRun(runId!))!.sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry));
    expect(results.map((r) => r.content.match(/^ran$/gm)?.length)).toEqual([1]);
  });

  it('a run that finished after telling the model about an uncertain call is accepted by the operator: effect confirmed, run completed, session usable', async () => {
    w = await cliWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo sent >> /tmp/sent.log' } }] },
      { content: 'The send may or may not have happened; stopping here.' },
      { content: 'Next task done.' },
    ]);
    // Killed right after the call's intent is committed as executing: nobody knows if it ran.
    const killed = await w.cli([...w.agentArgs('send it')], { BERTH_FAULT: 'after:effect.begin:agent-tool' });
    expect(killed.signal).toBe('SIGKILL');
    const runId = await w.read(async (s) => (await s.listRuns())[0]!.id);
    const resumed = await w.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(3);
    const before = await w.read(async (s) => ({ run: (await s.getRun(runId))!, effects: await s.listEffects({ runId }) }));
    expect(before.run.state).toBe('needs_reconciliation');
    expect(before.effects.map((e) => e.status)).toEqual(['unknown']);

    const accepted = await w.cli(['reconcile', runId, '--accept', '--json']);
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(lastJson<{ run: { state: string }; accepted: string[] }>(accepted)).toMatchObject({ run: { state: 'completed' }, accepted: [before.effects[0]!.id] });
    const after = await w.read(async (s) => ({ effects: await s.listEffects({ runId }), moves: (await s.listRunTransitions(runId)).map((t) => `${t.to} by ${t.actor}`) }));
    expect(after.effects[0]).toMatchObject({ status: 'confirmed', receipt: { type: 'operator-decision', by: 'user:tester', decision: 'accept' } });
    expect(after.moves.slice(-3)).toEqual(['needs_reconciliation by host:' + w.hostId, 'reconciling by user:tester', 'completed by user:tester']);
    const again = await w.cli(['reconcile', runId, '--accept']);
    expect(again.stderr).toContain('run_not_reconcilable');

    const session = await w.read(async (s) => (await s.getRun(runId))!.sessionId);
    const next = await w.cli(['chat', session, 'next task', '--json']);
    expect(next.code, next.stderr).toBe(0);
    expect(lastJson<{ answer: string }>(next).answer).toBe('Next task done.');
  });

  it('berth cancel with no live host stops the command a killed agent host left running in the session sandbox before it records the cancel', async () => {
    w = await cliWorld([{ toolCalls: [{ name: 'exec', arguments: { command: 'sleep 47' } }] }, { content: 'done' }]);
    const docker = await requireEngine();
    const host = await startInBackground(w, w.agentArgs('wait a while'));
    const sleeping = async (containerId: string) => {
      const exec = await docker.getContainer(containerId).exec({ Cmd: ['ps', '-o', 'args'], AttachStdout: true, AttachStderr: true });
      const stream = await exec.start({});
      const out = await new Promise<string>((resolve) => {
        let text = '';
        stream.on('data', (d: Buffer) => (text += d.toString('latin1')));
        stream.on('end', () => resolve(text));
        stream.on('error', () => resolve(text));
      });
      return out.split('\n').some((l) => l.includes('sleep 47'));
    };
    // The call's command runs in the sandbox: the host dies with it in flight.
    let found: { runId: string; containerId: string } | undefined;
    for (let i = 0; i < 600 && !found; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const seen = await w.read(async (s) => ({ run: (await s.listRuns())[0], lease: (await s.listLeases({})).find((l) => l.releasedAt === null && /^[0-9a-f]{12,}$/.test(l.containerId)) })).catch(() => undefined);
      if (seen?.run && seen.lease && (await sleeping(seen.lease.containerId).catch(() => false))) found = { runId: seen.run.id, containerId: seen.lease.containerId };
    }
    expect(found, host.stderr()).toBeDefined();
    host.child.kill('SIGKILL');
    await host.exited;
    const cancel = await w.cli(['cancel', found!.runId, '--json']);
    // A `never` call caught in flight: cancelled, its effect unknown, the run waits for a person (exit 3).
    expect(cancel.code, cancel.stderr.slice(-800)).toBe(3);
    expect(cancel.stderr).toContain('needs_reconciliation');
    // Before: the cancel was recorded while `sleep 47` went on in the sandbox the session keeps.
    expect(await sleeping(found!.containerId)).toBe(false);
    const effects = await w.read((s) => s.listEffects({ runId: found!.runId }));
    expect(effects.map((e) => e.status)).toEqual(['unknown']);
  });
});
