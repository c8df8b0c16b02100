import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { containerStdout } from '../support/agent-observe';
import { keepReleasing } from '../support/fleet';
import { bundledCli, planFixture } from '../support/plan-fixture';
import { rawSql, sharedPostgres, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

type Fx = Awaited<ReturnType<typeof planFixture>>;
let fx: Fx | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 400_000);
afterAll(stopSharedPostgres);

interface Exported {
  entries: Array<{ id: string; seq: number; kind: string; taskId: string | null; body: Record<string, unknown> }>;
}

const storeFor = async (kind: StoreKind) => (kind === 'postgres' ? { store: await (await sharedPostgres()).createStoreDatabase('sweeps') } : {});

/** `berth run` in the background, killed by the test mid-step. */
async function startRun(f: Fx) {
  const child = spawn(process.execPath, [await bundledCli(), 'run', f.plan, '--store', f.store, '--json'], { env: { ...process.env, BERTH_HOST_ID: f.hostId, BERTH_OPERATOR: 'tester' }, stdio: 'ignore' });
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  return { child, ended };
}

/** Waits until the second step's command has begun in the run's sandbox (its `began` file exists). */
async function secondStepRunning(f: Fx) {
  for (;;) {
    const found = await f.read(async (s) => ({ run: (await s.listRuns())[0], lease: (await s.listLeases({})).find((l) => l.releasedAt === null && l.containerId !== '') }));
    if (found.run && found.lease) {
      const began = await containerStdout(f.docker, found.lease.containerId, ['sh', '-c', 'test -e /workspace/began && echo yes || echo no']).catch(() => 'no');
      if (began.trim() === 'yes') return { runId: found.run.id, lease: found.lease };
    }
    await sleep(200);
  }
}

/**
 * A step held open until the test lets it go: the killed host's copy runs on in its sandbox however
 * slow the machine, and the resume's copy (on a restored sandbox) ends as soon as the test sees it,
 * where a fixed sleep had to outlast the wait and was then sat out again by the resume. The file is
 * outside the workspace, which the resume verifies before the step runs.
 */
const HELD = 'touch began && while [ ! -e /tmp/release ]; do sleep 0.2; done; echo two > two.txt';

/** `berth resume`, releasing the held step in every sandbox of the run but the killed host's. */
async function resumeReleasing(f: Fx, runId: string, oldContainerId: string) {
  const sessionId = (await f.read((s) => s.getRun(runId)))!.sessionId;
  const resuming = f.cli(['resume', runId, '--json']);
  await keepReleasing(f, sessionId, resuming, '/tmp/release', [oldContainerId]);
  return resuming;
}

const exportOf = async (f: Fx, runId: string) => {
  const out = await f.cli(['export', runId]);
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout) as Exported;
};

const containerGone = async (f: Fx, containerId: string) => f.docker.getContainer(containerId).inspect().then(() => false, () => true);

/** Takes the run's sweep entries out of the store, as a host that swept without recording it would have left it. */
async function deleteSweeps(f: Fx, kind: StoreKind) {
  await f.read(async (s) => {
    if (kind === 'sqlite') await rawSql(s, 'DROP TRIGGER entries_immutable_delete');
    else await rawSql(s, 'ALTER TABLE entries DISABLE TRIGGER entries_immutable_delete');
    await rawSql(s, "DELETE FROM entries WHERE kind = 'sandbox.swept'");
  });
}

describe.each(STORE_KINDS)('sweeps are entries of the run (%s store)', { timeout: 360_000 }, (kind) => {
  it('a host SIGKILLed mid-step leaves its command running in a live sandbox; the resume removes that sandbox, records the sweep before its verification, and berth check fails once the sweep entry is deleted', async () => {
    fx = await planFixture(
      [
        { name: 'one', run: 'echo one > one.txt' },
        { name: 'two', run: HELD },
      ],
      undefined,
      await storeFor(kind),
    );
    const { child, ended } = await startRun(fx);
    const { runId, lease } = await secondStepRunning(fx);
    child.kill('SIGKILL');
    expect((await ended).signal).toBe('SIGKILL');
    // The killed host's sandbox still runs the step's command (its lease has not run out).
    expect(await containerGone(fx, lease.containerId)).toBe(false);

    const resumed = await resumeReleasing(fx, runId, lease.containerId);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    expect(await containerGone(fx, lease.containerId)).toBe(true);

    const record = await exportOf(fx, runId);
    const swept = record.entries.filter((e) => e.kind === 'sandbox.swept');
    // Before: the removal was only a log line of the resuming process and a row of the host's sweeps table.
    expect(swept.map((e) => e.body)).toEqual([expect.objectContaining({ what: 'removed', reason: 'in_flight_safe_step', leaseId: lease.id, containerId: lease.containerId })]);
    const verified = record.entries.find((e) => e.kind === 'sandbox.verified')!;
    expect(verified.body).toMatchObject({ how: 'restored', replaced: { leaseId: lease.id, live: true } });
    expect(swept[0]!.seq).toBeLessThan(verified.seq);
    expect(swept[0]!.taskId).toBe(verified.taskId);
    const ok = await fx.cli(['check', runId, '--json']);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);

    fx.allowViolations('the test deletes the sweep entry from the store to see berth check catch it', ['sweeps_accounted']);
    await deleteSweeps(fx, kind);
    const caught = await fx.cli(['check', runId, '--json']);
    expect(caught.code, caught.stdout + caught.stderr).not.toBe(0);
    expect(caught.stdout).toContain('sweeps_accounted');
    expect(caught.stdout).toContain(lease.id);
  });
});

describe('sweeps of an adopted sandbox are entries of the run', { timeout: 360_000 }, () => {
  it('a host SIGKILLed in a never step leaves its command burning CPU; the resume stops it in the sandbox it adopts, the parked run records which command it killed, and the CPU it burnt is on the run\'s cost', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one > one.txt' },
      { name: 'deploy', run: 'touch began && while :; do :; done', replay: 'never' },
    ]);
    const { child, ended } = await startRun(fx);
    const { runId, lease } = await secondStepRunning(fx);
    // The container's own counter, once the command has burnt a measurable amount.
    const cpuUsec = async () => {
      const s = (await fx!.docker.getContainer(lease.containerId).stats({ stream: false })) as { cpu_stats?: { cpu_usage?: { total_usage?: number } } };
      return Math.round((s.cpu_stats?.cpu_usage?.total_usage ?? 0) / 1000);
    };
    let burnt = 0;
    while ((burnt = await cpuUsec()) < 300_000) await sleep(250);
    child.kill('SIGKILL');
    expect((await ended).signal).toBe('SIGKILL');

    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).not.toBe(0);
    expect((await fx.read((s) => s.getRun(runId)))!.state).toBe('needs_reconciliation');
    const record = await exportOf(fx, runId);
    const swept = record.entries.filter((e) => e.kind === 'sandbox.swept').map((e) => e.body);
    // Before: the kill was a warning on the console; the record said only that the step was interrupted.
    expect(swept).toEqual([
      expect.objectContaining({ what: 'commands', leaseId: lease.id, containerId: lease.containerId, commands: [{ tag: `${runId}:step:1`, state: 'killed', exitCode: null }] }),
    ]);
    expect((swept[0] as { killedProcesses: number }).killedProcesses).toBeGreaterThan(0);
    // Before: no CPU at all under the lease (the killed host's meter died with it), whatever the command burnt.
    const counted = await fx.read(async (s) => (await s.listCost({ runId })).filter((c) => c.key === lease.id && c.meter === 'cpu.usec').reduce((n, c) => n + c.amount, 0));
    expect(counted).toBeGreaterThanOrEqual(burnt);
    const check = await fx.cli(['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
    const accept = await fx.cli(['reconcile', runId, '--accept', '--json']);
    expect(accept.code, accept.stderr.slice(-800)).toBe(0);
  });

  it('a resume that takes up the sandbox a killed host left records what it stopped there before its verification, and berth check fails once that entry is deleted', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one > one.txt' },
      { name: 'two', run: 'cat one.txt' },
    ]);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#1' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const lease = await fx.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null)!);
    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const record = await exportOf(fx, runId);
    const swept = record.entries.find((e) => e.kind === 'sandbox.swept')!;
    const verified = record.entries.find((e) => e.kind === 'sandbox.verified')!;
    expect(verified.body).toMatchObject({ how: 'attached', leaseId: lease.id });
    // Nothing was running: the earlier host's only command there (step one) had ended, and says so.
    expect(swept.body).toMatchObject({ what: 'commands', leaseId: lease.id, commands: [{ tag: `${runId}:step:0`, state: 'ended', exitCode: 0 }], killedProcesses: 0 });
    expect(swept.seq).toBeLessThan(verified.seq);
    const ok = await fx.cli(['check', runId, '--json']);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);

    fx.allowViolations('the test deletes the sweep entry from the store to see berth check catch it', ['sweeps_accounted']);
    await deleteSweeps(fx, 'sqlite');
    const caught = await fx.cli(['check', runId, '--json']);
    expect(caught.code, caught.stdout + caught.stderr).not.toBe(0);
    expect(caught.stdout).toContain('sweeps_accounted');
    expect(caught.stdout).toContain('took up sandbox lease');
  });
});

// On PostgreSQL only (CI time: the suite keeps both cores busy): the same resume and sweep on SQLite are above.
describe.each(['postgres'] as const)('a host-wide sweep is in the record of the run it took a sandbox from (%s store)', { timeout: 360_000 }, (kind) => {
  it('a sandbox whose killed host\'s lease ran out, removed by berth gc, is recorded at the resume as lost and swept by that gc, and the run completes', async () => {
    fx = await planFixture(
      [
        { name: 'one', run: 'echo one > one.txt' },
        { name: 'two', run: HELD },
      ],
      undefined,
      await storeFor(kind),
    );
    const envFile = join(fx.dir, 'env.yaml');
    writeFileSync(envFile, readFileSync(envFile, 'utf8').replace('lease: { ttlS: 600, heartbeatS: 10 }', 'lease: { ttlS: 3, heartbeatS: 1 }'));
    const { child, ended } = await startRun(fx);
    const { runId, lease } = await secondStepRunning(fx);
    child.kill('SIGKILL');
    expect((await ended).signal).toBe('SIGKILL');
    // Nobody renews the lease now; once it has run out, gc may remove its container.
    for (;;) {
      const l = await fx.read((s) => s.getLease(lease.id));
      if (l!.expiresAt < Date.now()) break;
      await sleep(250);
    }
    const gc = await fx.cli(['gc', '--json']);
    expect(gc.code, gc.stderr.slice(-800)).toBe(0);
    expect(await containerGone(fx, lease.containerId)).toBe(true);
    const sweeps = await fx.read((s) => s.listSweeps({ leaseId: lease.id }));
    expect(sweeps).toEqual([expect.objectContaining({ leaseId: lease.id, containerId: lease.containerId, reason: 'expired', hostId: fx.hostId })]);

    const resumed = await resumeReleasing(fx, runId, lease.containerId);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    const record = await exportOf(fx, runId);
    const lost = record.entries.filter((e) => e.kind === 'sandbox.swept' && e.body.what === 'lost');
    // Before: the entry said only that the lease had expired; who removed its container was in the sweep log alone.
    expect(lost.map((e) => e.body)).toEqual([
      expect.objectContaining({ leaseId: lease.id, sweptBy: { hostId: fx.hostId, reason: 'expired', at: sweeps[0]!.at, containerId: lease.containerId } }),
    ]);
    const ok = await fx.cli(['check', runId, '--json']);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
  });
});
