import { afterEach, describe, expect, it } from 'vitest';
import { cliWorld } from '../support/agent-cli-world';
import { requireEngine } from '../support/docker-engine';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

type Resumed = { run: { state: string }; resume: { sandbox: { found: { state: string; leaseId: string | null; reason?: string }; did: { action: string; snapshotId?: string; leaseId: string | null } } } };

/** A two-step plan whose host was SIGKILLed right after step one's commit: its run and its live lease. */
async function killedAfterStepOne() {
  fx = await planFixture([
    { name: 'one', run: 'echo one > one.txt' },
    { name: 'two', run: 'cat one.txt' },
  ]);
  const killed = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'after:phase.complete:plan-step#1' });
  expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
  const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
  const lease = (await fx.read((s) => s.listLeases({ unreleased: true })))[0]!;
  return { fx, runId, lease };
}

describe('berth resume says what it found of the sandbox and what it did', { timeout: 300_000 }, () => {
  it('a sandbox removed while the host was down: resume says it found it gone and restored it from the newest snapshot, in its human output and --json', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one > one.txt' },
      { name: 'two', run: 'cat one.txt' },
    ]);
    const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#1' });
    expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
    const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
    const lease = (await fx.read((s) => s.listLeases({ unreleased: true })))[0]!;
    await fx.docker.getContainer(lease.containerId).remove({ force: true });
    const snapshot = (await fx.read((s) => s.listSnapshots({ runId }))).find((s) => s.checkpoint.includes('one'))!;

    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const out = lastJson<Resumed>(resumed);
    expect(out.run.state).toBe('completed');
    expect(out.resume.sandbox.found).toMatchObject({ state: 'gone', leaseId: lease.id });
    expect(out.resume.sandbox.did).toMatchObject({ action: 'restored', snapshotId: snapshot.id });
    expect(out.resume.sandbox.did.leaseId).not.toBe(lease.id);
    // Nothing but JSON on stdout; the human lines are for a person.
    expect(resumed.stdout.trim().split('\n').every((l) => l.startsWith('{') || l.startsWith(' ') || l.startsWith('}') || l === '')).toBe(true);
  });

  it('a cancel carried out while the sandbox is gone restores nothing, and says so instead of promising a restore', async () => {
    const { fx, runId, lease } = await killedAfterStepOne();
    await fx.docker.getContainer(lease.containerId).remove({ force: true });
    const cancel = await fx.cli(['cancel', runId]);
    expect(cancel.code, cancel.stderr.slice(-800)).toBe(0);
    // Before: 'resuming run R (cancelling) ...: restoring it from snapshot S, or asking when that cannot be done'.
    expect(cancel.stderr).toContain(`carrying out the cancel of run ${runId} as its owner`);
    expect(cancel.stderr).toContain('found the sandbox gone');
    expect(cancel.stderr).toContain('a cancel restores nothing');
    expect(cancel.stderr).not.toContain('restoring it from snapshot');
    expect((await fx.read((s) => s.getRun(runId)))!.state).toBe('cancelled');
    // And it did restore nothing: the killed host's lease is the only one the run ever had.
    expect((await fx.read((s) => s.listLeases({ runId }))).map((l) => l.id)).toEqual([lease.id]);
  });

  it('a sandbox still alive: resume says it found it alive and continued in it', async () => {
    const { fx, runId, lease } = await killedAfterStepOne();
    const resumed = await fx.cli(['resume', runId]);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    expect(resumed.stderr).toContain(`found the sandbox alive (lease ${lease.id}`);
    expect(resumed.stdout).toContain(`continued in the same sandbox (lease ${lease.id})`);
    // No raw JSON log line on the console without --debug.
    expect(resumed.stderr).not.toMatch(/^\{"level"/m);
  });

  it('a run killed while its workspace was uploaded, before any sandbox was recorded: resume says it leased one anew, not that it restored one from the upload snapshot it made itself', async () => {
    fx = await planFixture([{ name: 'one', run: 'cat README' }]);
    fx.allowLeftovers('the kills before the upload\'s commit leave the uploaded layer\'s image unrecorded; `berth gc` removes it after its grace period', unrecordedSnapshotImages);
    const killed = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'plan:uploaded' });
    expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
    const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
    expect(await fx.read((s) => s.listSnapshots({ runId }))).toEqual([]);

    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const out = lastJson<Resumed>(resumed);
    expect(out.run.state).toBe('completed');
    expect(out.resume.sandbox.found).toMatchObject({ state: 'none', leaseId: null });
    // Before: { action: 'restored', snapshotId: <the upload snapshot this resume took> }.
    expect(out.resume.sandbox.did).toMatchObject({ action: 'new' });
    expect(out.resume.sandbox.did.snapshotId).toBeUndefined();

    const again = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'plan:uploaded' });
    expect(again.signal, again.stderr.slice(-500)).toBe('SIGKILL');
    const second = (await fx.read((s) => s.listRuns())).find((r) => r.id !== runId)!.id;
    const human = await fx.cli(['resume', second]);
    expect(human.code, human.stderr.slice(-800)).toBe(0);
    expect(human.stdout).toContain('sandbox leased anew');
    expect(human.stdout).not.toContain('restored from snapshot');
  });

  it('a detached fork driven by resume: the summary says its sandbox was restored from the fork point\'s snapshot, as the live line does, not leased anew', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one > one.txt' },
      { name: 'two', run: 'cat one.txt' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-500)).toBe(0);
    const parent = lastJson<{ run: { id: string } }>(end).run.id;
    const detached = await fx.cli(['fork', parent, '--at', 'one', '--detach', '--json']);
    expect(detached.code, detached.stderr).toBe(0);
    const { runId, forkedFrom } = lastJson<{ runId: string; forkedFrom: { snapshotId: string } }>(detached);

    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const out = lastJson<Resumed>(resumed);
    expect(out.resume.sandbox.found).toMatchObject({ state: 'none' });
    // Before: { action: 'new' } and "sandbox leased anew", beside the live line naming the snapshot.
    expect(out.resume.sandbox.did).toMatchObject({ action: 'restored', snapshotId: forkedFrom.snapshotId });
  });
});

describe('berth resume of an agent run says what it found of the session sandbox and what it did', { timeout: 300_000 }, () => {
  let w: Awaited<ReturnType<typeof cliWorld>> | undefined;
  afterEach(async () => {
    await w?.cleanup();
    w = undefined;
  });

  it('an agent whose host was killed after a tool call and whose container was removed: resume says it found the sandbox gone and restored it from the tool\'s snapshot, and the next tool reads the file', async () => {
    w = await cliWorld(
      [
        { toolCalls: [{ name: 'write_file', arguments: { path: 'one.txt', content: 'kept\n' } }] },
        { toolCalls: [{ name: 'read_file', arguments: { path: 'one.txt' } }] },
        { content: 'done' },
      ],
      { snapshotPolicy: 'after-each-step' },
    );
    const killed = await w.cli(w.agentArgs('write then read'), { BERTH_FAULT: 'after:phase.complete:agent-tool#1' });
    expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
    const run = await w.read(async (s) => (await s.listRuns())[0]!);
    const lease = (await w.read((s) => s.listLeases({ sessionId: run.sessionId, unreleased: true })))[0]!;
    const docker = await requireEngine();
    await docker.getContainer(lease.containerId).remove({ force: true });
    const snapshot = (await w.read((s) => s.listSnapshots({ sessionId: run.sessionId }))).at(-1)!;

    const resumed = await w.cli(['resume', run.id, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const out = lastJson<Resumed>(resumed);
    expect(out.run.state).toBe('completed');
    expect(out.resume.sandbox.found).toMatchObject({ state: 'gone', leaseId: lease.id });
    expect(out.resume.sandbox.did).toMatchObject({ action: 'restored', snapshotId: snapshot.id });
    expect(out.resume.sandbox.did.leaseId).not.toBe(lease.id);
    // The file the killed host's tool wrote is there for the next tool: the restore was real.
    const results = await w.read((s) => s.listEntries(run.sessionId, { runId: run.id }));
    expect(results.filter((e) => e.kind === 'agent.tool_result').map((e) => JSON.stringify(e.body)).join('\n')).toContain('kept');
    expect(resumed.stderr).not.toMatch(/^\{"level"/m);
  });
});
