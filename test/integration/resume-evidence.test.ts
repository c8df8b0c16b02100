import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cliWorld } from '../support/agent-cli-world';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { planFixture } from '../support/plan-fixture';
import { rawSql, sharedPostgres, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 400_000);
afterAll(stopSharedPostgres);

const STEPS = [
  { name: 'one', run: 'echo one >> steps.log' },
  { name: 'two', run: 'echo two >> steps.log' },
  { name: 'three', run: 'cat steps.log' },
];

interface Exported {
  run: { versions: { envFingerprint?: string } };
  entries: Array<{ id: string; kind: string; taskId: string | null; body: Record<string, unknown> }>;
}

const storeFor = async (kind: StoreKind) => (kind === 'postgres' ? { store: await (await sharedPostgres()).createStoreDatabase('resume') } : {});

describe.each(STORE_KINDS)('what a restart verified is part of the record (%s store)', { timeout: 300_000 }, (kind) => {
  it('a step restarted after a kill records the restart and what its process verified of the sandbox, and berth check flags the run once that evidence is removed from the store', async () => {
    fx = await planFixture(STEPS, undefined, await storeFor(kind));
    fx.allowLeftovers('the kill before step two\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design `berth gc` removes it after its grace period', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);

    const exported = await fx.cli(['export', runId]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as Exported;
    const restarted = record.entries.filter((e) => e.kind === 'task.restarted' && e.body.kind === 'plan-step');
    // Before: a resume left no entry; the restart was only a counter on the task.
    expect(restarted.map((e) => [e.body.phase, e.body.restarts])).toEqual([['run', 1]]);
    const verified = record.entries.filter((e) => e.kind === 'sandbox.verified');
    expect(verified).toHaveLength(1);
    expect(verified[0]!.taskId).toBe(restarted[0]!.taskId);
    // A safe step caught mid-run continues on its checkpoint's snapshot, checked against the recorded digest.
    expect(verified[0]!.body).toMatchObject({ how: 'restored', envFingerprint: record.run.versions.envFingerprint, kernel: expect.any(String), snapshotId: expect.any(String), workspaceDigest: expect.any(String) });
    const ok = await fx.cli(['check', runId, '--json']);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);

    // A resume that used its sandbox without verifying it: the same store with the evidence taken out.
    fx.allowViolations('the test removes the restart\'s verification evidence from the store to see berth check catch it', ['resume_verified']);
    await fx.read(async (s) => {
      if (kind === 'sqlite') await rawSql(s, 'DROP TRIGGER entries_immutable_delete');
      else await rawSql(s, 'ALTER TABLE entries DISABLE TRIGGER entries_immutable_delete');
      await rawSql(s, "DELETE FROM entries WHERE kind = 'sandbox.verified'");
    });
    const caught = await fx.cli(['check', runId, '--json']);
    expect(caught.code, caught.stdout + caught.stderr).not.toBe(0);
    expect(caught.stdout).toContain('resume_verified');
    expect(caught.stdout).toContain('no record of verifying its sandbox');
  });

  it('a sandbox removed behind the host\'s back (docker rm -f) is found by the resume\'s verification and recorded on the run with the snapshot that replaced it', async () => {
    fx = await planFixture(STEPS, undefined, await storeFor(kind));
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#1' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const lease = await fx.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null)!);
    await fx.docker.getContainer(lease.containerId).remove({ force: true });
    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const exported = await fx.cli(['export', runId]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as Exported;
    // Before: the loss was a log line of the resuming process; the record said nothing of it.
    const verified = record.entries.filter((e) => e.kind === 'sandbox.verified');
    expect(verified).toHaveLength(1);
    expect(verified[0]!.body).toMatchObject({ how: 'restored', snapshotId: expect.any(String), replaced: { leaseId: lease.id, reason: `container ${lease.containerId} does not exist` } });
    const check = await fx.cli(['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });

  it('a resume killed before its first commit is accounted for: the next owner records it (epoch, holder, process) on the run', async () => {
    fx = await planFixture(STEPS, undefined, await storeFor(kind));
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#1' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const sessionId = await fx.read(async (s) => (await s.getRun(runId))!.sessionId);
    // The first commit a resume makes is the record of the owner it replaced: killed right before it.
    const dies = await fx.cli(['resume', runId, '--json'], { BERTH_FAULT: 'before:session.owner-lost#1' });
    expect(dies.signal, dies.stderr).toBe('SIGKILL');
    const claimOfTheDead = (await fx.read((s) => s.getSessionOwner(sessionId)))!;
    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const exported = await fx.cli(['export', runId]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as Exported;
    // Before: a process killed before its first commit left nothing in the record.
    const lost = record.entries.filter((e) => e.kind === 'owner.lost').map((e) => e.body);
    expect(lost).toEqual([expect.objectContaining({ epoch: claimOfTheDead.epoch, holder: claimOfTheDead.holder, pid: claimOfTheDead.pid, newEpoch: claimOfTheDead.epoch + 1 })]);
    const check = await fx.cli(['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });
});

describe('what an agent tool\'s restart verified is part of the record', { timeout: 300_000 }, () => {
  let w: Awaited<ReturnType<typeof cliWorld>> | undefined;
  afterEach(async () => {
    await w?.cleanup();
    w = undefined;
  }, 400_000);

  it('a tool restarted after a kill records what its process verified of the session sandbox before its result, and berth check passes', async () => {
    w = await cliWorld([{ toolCalls: [{ name: 'read_file', arguments: { path: 'hello.txt' } }] }, { content: 'done' }]);
    // Killed as the tool's result commits: the safe call runs again in the resumed process, on a sandbox it must verify first.
    const killed = await w.cli(w.agentArgs('read it'), { BERTH_FAULT: 'before:phase.complete:agent-tool#1' });
    expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
    const runId = await w.read(async (s) => (await s.listRuns())[0]!.id);
    const resumed = await w.cli(['resume', runId]);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);

    const out = await w.cli(['export', runId]);
    expect(out.code, out.stderr).toBe(0);
    const r = JSON.parse(out.stdout) as Exported;
    const tool = r.entries.find((e) => e.kind === 'agent.tool_result')!.taskId!;
    const ofTool = r.entries.filter((e) => e.taskId === tool).map((e) => e.kind);
    // Before: the restart was entered, and the tool's result followed with nothing saying what was checked.
    expect(ofTool).toEqual(expect.arrayContaining(['task.restarted', 'sandbox.verified', 'agent.tool_result']));
    expect(ofTool.indexOf('task.restarted')).toBeLessThan(ofTool.indexOf('sandbox.verified'));
    expect(ofTool.indexOf('sandbox.verified')).toBeLessThan(ofTool.indexOf('agent.tool_result'));
    const verified = r.entries.find((e) => e.kind === 'sandbox.verified' && e.taskId === tool)!.body;
    expect(verified).toMatchObject({ kernel: expect.any(String), envFingerprint: r.run.versions.envFingerprint, leaseId: expect.any(String) });
    const check = await w.cli(['check', runId]);
    expect(check.code, check.stdout + check.stderr).toBe(0);

    // A restarted tool whose result came from a sandbox nothing verified: the same store with the evidence taken out.
    // Before: berth check required a verification only before a plan step's output, and passed this.
    await w.read(async (s) => {
      await rawSql(s, 'DROP TRIGGER entries_immutable_delete');
      await rawSql(s, "DELETE FROM entries WHERE kind = 'sandbox.verified'");
    });
    const caught = await w.cli(['check', runId, '--json']);
    expect(caught.code, caught.stdout + caught.stderr).not.toBe(0);
    expect(caught.stdout).toContain('resume_verified');
    expect(caught.stdout).toContain('nothing verified since the restart');
  });

  it('a tool whose first try after the restart failed once it had verified the sandbox still records that verification before its result, and berth check passes', async () => {
    w = await cliWorld([{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'written\n' } }] }, { content: 'done' }], { snapshotPolicy: 'after-each-step' });
    const killed = await w.cli(w.agentArgs('write it'), { BERTH_FAULT: 'before:phase.complete:agent-tool#1' });
    expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
    const runId = await w.read(async (s) => (await s.listRuns())[0]!.id);
    // The resumed tool verifies the sandbox, then its snapshot fails (an engine 5xx): the phase throws
    // and is retried. Before: the retry found the sandbox held, and the verification the failed try
    // had taken was in no commit (berth check: resume_verified ... nothing verified since the restart).
    const resumed = await w.cli(['resume', runId], { BERTH_FAULT_ERROR: 'snapshot.take#1' });
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const r = JSON.parse((await w.cli(['export', runId])).stdout) as Exported;
    const tool = r.entries.find((e) => e.kind === 'agent.tool_result')!.taskId!;
    const ofTool = r.entries.filter((e) => e.taskId === tool).map((e) => e.kind);
    expect(ofTool.filter((k) => k === 'sandbox.verified')).toHaveLength(1);
    expect(ofTool.indexOf('task.restarted')).toBeLessThan(ofTool.indexOf('sandbox.verified'));
    expect(ofTool.indexOf('sandbox.verified')).toBeLessThan(ofTool.indexOf('agent.tool_result'));
    // The failed try is on record: the phase threw once and was retried.
    expect((await w.read((s) => s.getTask(tool)))?.attempts).toBe(1);
    const check = await w.cli(['check', runId]);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });
});
