import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startCountingService } from '../support/counting-service';
import { sharedPostgres, stopSharedPostgres } from '../support/store-kinds';
import { lastJson, planFixture, type PlanStepDef } from '../support/plan-fixture';
import { finishedStepCounts, keepReleasing, runDigest, freezeOutsideWrite, runSettled, sleep, startWorker, stepRunning, stopChildren, stopWorker, submitDetached, waitFor, type WorkerProcess } from '../support/fleet';
import { leftoversOf } from './fleet-leftover-probe';

/** Short enough that a takeover happens within seconds here; long against the renewals (every TTL/3). */
const TTL_MS = 3000;

/**
 * A step held open until the test lets it go (a file outside the workspace, which a restore
 * verifies): its first owner is killed, frozen or drained in the middle of it however slow the
 * machine, and the copy run again after a takeover ends once the test sees it, where a sleep long
 * enough for the first was sat out again by the second.
 */
const held = (line: string) => `while [ ! -e /tmp/release ]; do sleep 0.2; done; echo ${line} >> steps.log`;

/** True once /tmp/began exists in a sandbox of the session (read by the engine: no process in the sandbox). */
async function commandBegan(f: NonNullable<typeof fx>, sessionId: string): Promise<true | undefined> {
  for (const c of await f.docker.listContainers({ filters: { label: [`berth.session=${sessionId}`] } })) {
    const found = await f.docker.getContainer(c.Id).infoArchive({ path: '/tmp/began' }).then(() => true, () => false);
    if (found) return true;
  }
  return undefined;
}

/** Waits for `until`, releasing held steps in every sandbox of the session but those in `except`. */
async function releasing<T>(f: NonNullable<typeof fx>, sessionId: string, until: Promise<T>, except: string[] = []): Promise<T> {
  await keepReleasing(f, sessionId, until, '/tmp/release', except);
  return until;
}

// Twelve steps, each appending to a log: a finished step run again on the same sandbox would show
// in the final digest; step 8 is held so that its owner can be killed in the middle of it, with
// seven finished before it and four to go (CI time: twenty, on two stores with their twins, took 150 s).
const STEPS: PlanStepDef[] = Array.from({ length: 12 }, (_, i) => ({ name: `s${i + 1}`, run: i === 7 ? held(`s${i + 1}`) : `echo s${i + 1} >> steps.log` }));

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterAll(stopSharedPostgres, 60_000);
let workers: WorkerProcess[] = [];
let service: Awaited<ReturnType<typeof startCountingService>> | undefined;
afterEach(async () => {
  await stopChildren(workers, 30_000);
  workers = [];
  await service?.close();
  service = undefined;
  await fx?.cleanup();
  fx = undefined;
});

let twinDigest: Promise<string> | undefined;
/** The final workspace digest of the same plan run with nothing killed (once per file: both stores' cases compare with it). */
function uninterruptedDigest(): Promise<string> {
  twinDigest ??= runTwin();
  return twinDigest;
}

async function runTwin(): Promise<string> {
  const twin = await planFixture(STEPS);
  try {
    const running = twin.cli(['run', twin.plan, '--json']);
    const sessionId = await waitFor('the twin run to start', () => twin.read(async (s) => (await s.listRuns())[0]?.sessionId));
    const end = await releasing(twin, sessionId, running);
    expect(end.code, end.stderr).toBe(0);
    return (await twin.read(async (s) => (await s.listSnapshots({})).at(-1)!.workspaceDigest));
  } finally {
    await twin.cleanup();
  }
}

/**
 * Two workers on one store (a SQLite file, or a PostgreSQL database when `store` is its URL): the
 * owner is SIGKILLed in the middle of step 8; the other takes over once the lease ran out.
 */
async function ownerKilledMidStep(store?: string): Promise<void> {
  const expected = await uninterruptedDigest();
  fx = await planFixture(STEPS, undefined, store ? { store } : {});
  const run = await submitDetached(fx);
  expect(run.state).toBe('admitted');
  workers = [await startWorker(fx, TTL_MS), await startWorker(fx, TTL_MS)];
  await waitFor('step 8 to run', () => stepRunning(fx!, run.id, 7));
  await sleep(1000);
  const owner = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
  const victim = workers.find((w) => w.pid === owner.pid)!;
  const other = workers.find((w) => w !== victim)!;
  expect(victim, `owner pid ${owner.pid} is one of the workers`).toBeDefined();
  const [victimLease] = await fx.read((s) => s.listLeases({ runId: run.id, unreleased: true }));
  victim.child.kill('SIGKILL');
  await victim.exited;

  // The killed owner's copy of step 8 is never released: only the survivor's ends.
  const end = await releasing(fx, run.sessionId, runSettled(fx, run.id), [victimLease!.containerId]);
  expect(end.state, other.stderr()).toBe('completed');
  const now = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
  // The survivor claimed the session under a new epoch.
  expect(now.epoch).toBeGreaterThan(owner.epoch);
  expect(now.pid).toBe(other.pid);
  // Same machine: the survivor sees the owner's process is gone and need not wait for the TTL.
  expect(other.stderr()).toMatch(/whose (lease ran out|process is gone)/);
  expect(await runDigest(fx, run.id)).toBe(expected);
  const counts = await finishedStepCounts(fx, run.id);
  expect(counts).toEqual(Object.fromEntries(STEPS.map((s) => [s.name, 1])));
}

describe('two workers on one store', { timeout: 600_000 }, () => {
  it('a 12-step plan run whose owner is SIGKILLed mid-step is taken over by the other worker once the lease expired, ends with the uninterrupted digest, and no finished step runs again', async () => {
    await ownerKilledMidStep();
  });

  it('the same on a PostgreSQL store: the survivor takes the run over once the lease expired and ends with the uninterrupted digest, every step once', async () => {
    await ownerKilledMidStep(await (await sharedPostgres()).createStoreDatabase('fleet'));
  });

  it('resume of a run a live worker owns, without --take-over, is refused naming the owner and writes nothing; --take-over records the operator and the worker stops all work on the run', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      // Waits for a file the test writes once the take-over is recorded: however slow the machine,
      // the worker cannot finish the run before the operator takes it (it could, with a fixed sleep).
      { name: 'long', run: 'while [ ! -e /tmp/release ]; do sleep 0.2; done; echo long >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const run = await submitDetached(fx);
    const w = await startWorker(fx, TTL_MS);
    workers = [w];
    await waitFor('the long step to run', () => stepRunning(fx!, run.id, 1));
    const before = await fx.read(async (s) => ({ commits: (await s.listCommits(run.sessionId)).length, owner: await s.getSessionOwner(run.sessionId) }));

    // berth workers lists the worker, its heartbeat and the run it owns; show names it as the driver.
    const listed = await fx.cli(['workers', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const hosts = lastJson<{ hosts: Array<{ pid: number; stoppedAt: number | null; lastHeartbeatAgoMs: number; owns: Array<{ runId: string }> }> }>(listed).hosts;
    expect(hosts).toMatchObject([{ pid: w.pid, stoppedAt: null, owns: [{ runId: run.id }] }]);
    const shown = await fx.cli(['show', run.id, '--json']);
    expect(lastJson<{ owner: { pid: number; live: boolean } }>(shown).owner).toMatchObject({ pid: w.pid, live: true });

    const refused = await fx.cli(['resume', run.id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('run_owned');
    expect(refused.stderr).toContain(`pid ${w.pid}`);
    expect(refused.stderr).toContain('--take-over');
    const after = await fx.read(async (s) => ({ commits: (await s.listCommits(run.sessionId)).length, owner: await s.getSessionOwner(run.sessionId) }));
    // Nothing written by the refused resume: the owner row is the worker's, same epoch; commits only the worker's own.
    expect(after.owner).toMatchObject({ pid: w.pid, epoch: before.owner!.epoch });
    const transitions = await fx.read((s) => s.listRunTransitions(run.id));
    expect(transitions.some((t) => t.actor.startsWith('user:'))).toBe(false);

    const taking = fx.cli(['resume', run.id, '--take-over', '--json']);
    await waitFor('the take-over to be recorded', () => fx!.read(async (s) => ((await s.listRunTransitions(run.id)).some((t) => t.reason.startsWith('taken over')) ? true : undefined)));
    await keepReleasing(fx, run.sessionId, taking, '/tmp/release');
    const taken = await taking;
    expect(taken.code, taken.stderr).toBe(0);
    const end = (await fx.read((s) => s.getRun(run.id)))!;
    expect(end.state).toBe('completed');
    const log = await fx.read((s) => s.listRunTransitions(run.id));
    const takeOver = log.find((t) => t.reason.startsWith('taken over'));
    expect(takeOver, JSON.stringify(log)).toMatchObject({ actor: 'user:tester', from: 'running', to: 'running' });
    expect(takeOver!.reason).toContain(`pid ${w.pid}`);
    await waitFor('the worker to report the loss', async () => (w.stderr().includes(`lost session ${run.sessionId}`) ? true : undefined), 30_000);
    expect(await finishedStepCounts(fx, run.id)).toEqual({ one: 1, long: 1, three: 1 });
    // The worker lives on (it only gave up that run) and drains on SIGTERM.
    expect(w.child.exitCode).toBeNull();
    expect(await stopWorker(w)).toBe(0);
  });

  it('a stale owner SIGSTOPped past its lease is taken over; after SIGCONT its next commit or renewal is refused, it stops all work on the run, and the never step runs once', async () => {
    service = await startCountingService();
    const port = new URL(service.url).port;
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'slow', run: held('slow') },
      { name: 'deploy', run: `timeout 20 busybox wget -q -O - http://localhost:${port}/deploy && echo deployed >> steps.log`, replay: 'never' },
      { name: 'four', run: 'echo four >> steps.log' },
    ]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);
    const run = await submitDetached(fx);
    workers = [await startWorker(fx, TTL_MS), await startWorker(fx, TTL_MS)];
    await waitFor('the slow step to run', () => stepRunning(fx!, run.id, 1));
    await sleep(1000);
    const owner = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
    const stale = workers.find((w) => w.pid === owner.pid)!;
    const other = workers.find((w) => w !== stale)!;
    const [oldLease] = await fx.read((s) => s.listLeases({ runId: run.id, unreleased: true }));
    await freezeOutsideWrite(stale.child, fx.store);
    // While the stale owner is frozen, the new owner removes what it left on the engine: the old
    // lease's container, its network and its INPUT rules (the commands in it stop with it).
    await waitFor('the run to be taken over', async () => ((await fx!.read((s) => s.getSessionOwner(run.sessionId)))!.epoch > owner.epoch ? true : undefined));
    await waitFor('the frozen owner\'s sandbox, network and rules to be removed', async () => {
      const left = await leftoversOf(fx!.docker, oldLease!.id);
      return left.containers + left.networks + left.rules === 0 ? left : undefined;
    }, 120_000, 250);
    expect(stale.child.signalCode ?? stale.child.exitCode).toBeNull();
    expect((await fx.read((s) => s.getLease(oldLease!.id)))!.releasedAt).not.toBeNull();
    // On a timeout, what the live worker was doing (its log) is the evidence.
    const end = await releasing(fx, run.sessionId, runSettled(fx, run.id), [oldLease!.containerId]).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; the live worker's log:\n${other.stderr().slice(-4000)}`);
    });
    expect(end.state, other.stderr()).toBe('completed');
    const taken = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
    expect(taken.pid).toBe(other.pid);
    expect(taken.epoch).toBeGreaterThan(owner.epoch);
    const commits = (await fx.read((s) => s.listCommits(run.sessionId))).length;

    stale.child.kill('SIGCONT');
    await waitFor('the stale worker to learn it lost the run', async () => (stale.stderr().includes(`lost session ${run.sessionId}`) ? true : undefined), 60_000);
    // It gave up the run without writing: no commit after the takeover's, and it is still a live worker.
    await sleep(TTL_MS);
    expect((await fx.read((s) => s.listCommits(run.sessionId))).length).toBe(commits);
    expect(stale.child.exitCode).toBeNull();
    expect(service.counts()).toEqual({ deploy: 1 });
    expect(await finishedStepCounts(fx, run.id)).toEqual({ one: 1, slow: 1, deploy: 1, four: 1 });
    // The old epoch's sandbox was never used again: every snapshot after the takeover was taken in
    // a sandbox leased after it (labelled with the new epoch).
    const after = await fx.read(async (s) => {
      const leases = new Map((await s.listLeases({ runId: run.id })).map((l) => [l.id, l]));
      return (await s.listSnapshots({ runId: run.id })).filter((x) => x.createdAt > taken.takenAt).map((x) => leases.get(x.leaseId!)!.createdAt > owner.takenAt && leases.get(x.leaseId!)!.createdAt >= taken.takenAt);
    });
    expect(after.length).toBeGreaterThan(0);
    expect(after.every(Boolean)).toBe(true);
    // None survives: every lease of the ended run is released and its container gone (the fixture's leak check).
    const open = await fx.read(async (s) => (await s.listLeases({ runId: run.id })).filter((l) => l.releasedAt === null));
    expect(open).toEqual([]);
  });

  it('SIGTERM drains a worker: the step in flight finishes and commits, no new step starts, the run is released at once (no wait for the lease), and another worker finishes it', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'mid', run: `touch /tmp/began; ${held('mid')}` },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const run = await submitDetached(fx);
    // A lease far longer than the test: only a release lets the second worker in.
    const first = await startWorker(fx, 600_000, ['--grace', '60']);
    workers = [first];
    await waitFor('the middle step to run', () => stepRunning(fx!, run.id, 1));
    // Its command, not only its task: a SIGTERM between the step's phases (the task running, its
    // command not started) drains with no phase in flight, and the step rightly never starts (seen
    // in a full suite: `expected { one: 1 } to deeply equal { one: 1, mid: 1 }`).
    await waitFor('the middle step\'s command to run', () => commandBegan(fx!, run.sessionId));
    first.child.kill('SIGTERM');
    // Released only once the drain has begun (the worker says so as it starts it): the step is in
    // flight when the drain starts, however slow the machine.
    await waitFor('the worker to start draining', async () => (first.stderr().includes('draining:') ? true : undefined));
    expect(await releasing(fx, run.sessionId, first.exited)).toBe(0);
    expect(first.stderr()).toContain('drained; leases released');
    const owner = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
    expect(owner.stoppedAt).not.toBeNull();
    // The step in flight finished during the drain; the next one never started.
    expect(await finishedStepCounts(fx, run.id)).toEqual({ one: 1, mid: 1 });
    expect((await fx.read((s) => s.getRun(run.id)))!.state).toBe('running');
    const hosts = await fx.read((s) => s.listHosts());
    expect(hosts.find((h) => h.pid === first.pid)!.stoppedAt).not.toBeNull();

    const second = await startWorker(fx, 600_000);
    workers.push(second);
    const end = await runSettled(fx, run.id);
    expect(end.state, second.stderr()).toBe('completed');
    expect((await fx.read((s) => s.getSessionOwner(run.sessionId)))!.epoch).toBe(owner.epoch + 1);
    expect(await finishedStepCounts(fx, run.id)).toEqual({ one: 1, mid: 1, three: 1 });
  });

  it('a run submitted with --tags is claimed only by a worker that has all of them; berth run --tags without --detach is a usage error', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one >> steps.log' }]);
    const plain = await startWorker(fx, TTL_MS);
    workers = [plain];
    const usage = await fx.cli(['run', fx.plan, '--tags', 'gpu']);
    expect(usage.code).toBe(2);
    const end = await fx.cli(['run', fx.plan, '--detach', '--tags', 'gpu', '--json']);
    expect(end.code, end.stderr).toBe(0);
    const run = lastJson<{ run: { id: string; sessionId: string } }>(end).run;
    // Several claim rounds of the untagged worker (one per TTL/3) leave it alone.
    await waitFor('the untagged worker to have run a few claim rounds', async () => ((await fx!.read((s) => s.listHosts()))[0]!.heartbeatAt > Date.now() - 500 ? true : undefined));
    await sleep(TTL_MS * 2);
    expect(await fx.read((s) => s.getSessionOwner(run.sessionId))).toBeUndefined();
    const gpu = await startWorker(fx, TTL_MS, ['--tags', 'gpu,big']);
    workers.push(gpu);
    const done = await runSettled(fx, run.id);
    expect(done.state).toBe('completed');
    expect((await fx.read((s) => s.getSessionOwner(run.sessionId)))!.pid).toBe(gpu.pid);
    expect(plain.stderr()).not.toContain(run.sessionId);
  });
});
