import { afterEach, describe, expect, it } from 'vitest';
import { planFixture, type PlanStepDef } from '../support/plan-fixture';
import { finishedStepCounts, runDigest, runSettled, sleep, startWorker, stepRunning, stopWorker, submitDetached, waitFor, type WorkerProcess } from '../support/fleet';

/** Short enough that a takeover happens within seconds here; long against the renewals (every TTL/3). */
const TTL_MS = 3000;

// Twenty steps, each appending to a log: a finished step run again on the same sandbox would show
// in the final digest; step 8 sleeps so that its owner can be killed in the middle of it.
const STEPS: PlanStepDef[] = Array.from({ length: 20 }, (_, i) => ({ name: `s${i + 1}`, run: i === 7 ? `sleep 4 && echo s${i + 1} >> steps.log` : `echo s${i + 1} >> steps.log` }));

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let workers: WorkerProcess[] = [];
afterEach(async () => {
  for (const w of workers) await stopWorker(w, 30_000);
  workers = [];
  await fx?.cleanup();
  fx = undefined;
});

async function uninterruptedDigest(): Promise<string> {
  const twin = await planFixture(STEPS);
  try {
    const end = await twin.cli(['run', twin.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    return (await twin.read(async (s) => (await s.listSnapshots({})).at(-1)!.workspaceDigest));
  } finally {
    await twin.cleanup();
  }
}

describe('two workers on one store', { timeout: 600_000 }, () => {
  it('a 20-step plan run whose owner is SIGKILLed mid-step is taken over by the other worker once the lease expired, ends with the uninterrupted digest, and no finished step runs again', async () => {
    const expected = await uninterruptedDigest();
    fx = await planFixture(STEPS);
    const run = await submitDetached(fx);
    expect(run.state).toBe('admitted');
    workers = [await startWorker(fx, TTL_MS), await startWorker(fx, TTL_MS)];
    await waitFor('step 8 to run', () => stepRunning(fx!, run.id, 7));
    await sleep(1000);
    const owner = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
    const victim = workers.find((w) => w.pid === owner.pid)!;
    const other = workers.find((w) => w !== victim)!;
    expect(victim, `owner pid ${owner.pid} is one of the workers`).toBeDefined();
    victim.child.kill('SIGKILL');
    await victim.exited;

    const end = await runSettled(fx, run.id);
    expect(end.state, other.stderr()).toBe('completed');
    const now = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
    // The survivor claimed the session under a new epoch.
    expect(now.epoch).toBeGreaterThan(owner.epoch);
    expect(now.pid).toBe(other.pid);
    expect(other.stderr()).toContain('whose lease ran out');
    expect(await runDigest(fx, run.id)).toBe(expected);
    const counts = await finishedStepCounts(fx, run.id);
    expect(counts).toEqual(Object.fromEntries(STEPS.map((s) => [s.name, 1])));
  });

  it('resume of a run a live worker owns, without --take-over, is refused naming the owner and writes nothing; --take-over records the operator and the worker stops all work on the run', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'long', run: 'sleep 6 && echo long >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const run = await submitDetached(fx);
    const w = await startWorker(fx, TTL_MS);
    workers = [w];
    await waitFor('the long step to run', () => stepRunning(fx!, run.id, 1));
    const before = await fx.read(async (s) => ({ commits: (await s.listCommits(run.sessionId)).length, owner: await s.getSessionOwner(run.sessionId) }));

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

    const taken = await fx.cli(['resume', run.id, '--take-over', '--json']);
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
});
