import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { startCountingService } from '../support/counting-service';
import { sharedPostgres, stopSharedPostgres } from '../support/store-kinds';
import { lastJson, planFixture, type PlanStepDef } from '../support/plan-fixture';
import { keepReleasing, releaseStep, runSettled, sleep, startCli, startWorker, stepRunning, processesOf, stopChildren, waitFor, type WorkerProcess } from '../support/fleet';

/**
 * Issue 24: one owner per run, for every host (`berth run`, `resume`, `reconcile`, `worker`), and
 * no command outliving the host that started it. Real Docker, real SQLite, real child processes
 * killed with SIGKILL or frozen with SIGSTOP, a counting service on loopback for the `never` action.
 */

type Fixture = Awaited<ReturnType<typeof planFixture>>;
let fx: Fixture | undefined;
let service: Awaited<ReturnType<typeof startCountingService>> | undefined;
let children: WorkerProcess[] = [];
afterAll(stopSharedPostgres, 60_000);
afterEach(async () => {
  await stopChildren(children, 20_000);
  children = [];
  await service?.close();
  service = undefined;
  await fx?.cleanup();
  fx = undefined;
});

/** A plan whose `deploy` step (replay never) reaches the counting service through the audited proxy. */
async function withService(steps: (port: string) => PlanStepDef[], store?: string): Promise<{ fx: Fixture; service: NonNullable<typeof service> }> {
  service = await startCountingService();
  const port = new URL(service.url).port;
  fx = await planFixture(steps(port), undefined, store ? { store } : {});
  const envFile = join(fx.dir, 'env.yaml');
  writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);
  return { fx, service };
}

const post = (port: string) => `timeout 20 busybox wget -q -O - http://localhost:${port}/deploy`;

async function theRun(f: Fixture): Promise<Run> {
  return waitFor('the run to exist', () => f.read(async (s) => (await s.listRuns())[0]));
}


describe('one owner per run', { timeout: 300_000 }, () => {
  it('stops the command a SIGKILLed host left running before parking its never step, so --reject-effect runs it exactly once', async () => {
    const { fx, service } = await withService((port) => [
      { name: 'one', run: 'echo one >> steps.log' },
      // Posts only once the test releases it: the old command is alive at the resume however slow the machine.
      { name: 'deploy', run: `while [ ! -e /tmp/release ]; do sleep 0.2; done; ${post(port)} && echo deployed >> steps.log`, replay: 'never' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    const host = await startCli(fx, ['run', fx.plan]);
    children.push(host);
    const run = await theRun(fx);
    await waitFor('the deploy step to run', () => stepRunning(fx, run.id, 1));
    await waitFor('its command to start', async () => ((await processesOf(fx, run.sessionId, 'release')) > 0 ? true : undefined));
    host.child.kill('SIGKILL');
    await host.exited;

    const parked = await fx.cli(['resume', run.id, '--json']);
    expect(parked.code, parked.stderr).toBe(3);
    // The old command is gone before anything was decided, and said so in the reason.
    expect(await processesOf(fx, run.sessionId, 'release')).toBe(0);
    const reason = (await fx.read((s) => s.listRunTransitions(run.id))).at(-1)!.reason;
    expect(reason).toMatch(/its command was still running and was stopped before this was decided/);
    // Released now: an old command still alive would post at once. It never does.
    await releaseStep(fx, run.sessionId, '/tmp/release');
    await sleep(3000);
    expect(service.counts().deploy).toBeUndefined();

    const reconciling = fx.cli(['reconcile', run.id, '--reject-effect', '--json']);
    await keepReleasing(fx, run.sessionId, reconciling, '/tmp/release');
    const done = await reconciling;
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<{ run: Run }>(done).run.state).toBe('completed');
    expect(service.counts()).toEqual({ deploy: 1 });
  });

  it('leaves no second process running a step after a SIGKILL in a sandbox the killed host had restored', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'long', run: 'sleep 15 && echo long >> steps.log' },
    ]);
    const first = await startCli(fx, ['run', fx.plan]);
    children.push(first);
    const run = await theRun(fx);
    await waitFor('the long step to run', async () => ((await processesOf(fx!, run.sessionId, 'sleep 15')) > 0 ? true : undefined));
    first.child.kill('SIGKILL');
    await first.exited;
    // The resume restores a new sandbox for the safe step caught mid-run, and is killed in it
    // before the step commits: the pointer still names the first sandbox.
    const second = await startCli(fx, ['resume', run.id]);
    children.push(second);
    const leasesBefore = (await fx.read((s) => s.listLeases({ runId: run.id }))).length;
    await waitFor('the step to run in a restored sandbox', async () => {
      const leases = await fx!.read((s) => s.listLeases({ runId: run.id, unreleased: true }));
      return leases.length > 0 && (await fx!.read((s) => s.listLeases({ runId: run.id }))).length > leasesBefore && (await processesOf(fx!, run.sessionId, 'sleep 15')) > 0 ? true : undefined;
    });
    second.child.kill('SIGKILL');
    await second.exited;

    const third = await startCli(fx, ['resume', run.id]);
    children.push(third);
    let most = 0;
    const watch = (async () => {
      while (third.child.exitCode === null) {
        most = Math.max(most, await processesOf(fx!, run.sessionId, 'sleep 15'));
        await sleep(300);
      }
    })();
    expect(await third.exited, third.stderr()).toBe(0);
    await watch;
    expect(most, 'containers running the step at once, over every container of the run').toBe(1);
    expect((await fx.read((s) => s.getRun(run.id)))!.state).toBe('completed');
  });

  it('resume --take-over of a run that berth run drives is recorded as a take-over, and the old host stops within one renewal', async () => {
    // The step waits for a file the test writes only once the old host has stopped: however slow
    // the machine, the run cannot finish before the take-over (it used to, under load, with a sleep).
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'wait', run: 'while [ ! -e /tmp/release ]; do sleep 0.2; done; echo waited >> steps.log' },
    ]);
    const ttl = { BERTH_LEASE_TTL_MS: '3000' };
    const first = await startCli(fx, ['run', fx.plan], ttl);
    children.push(first);
    const run = await theRun(fx);
    await waitFor('the wait step to run', () => stepRunning(fx!, run.id, 1));
    // A live owner is not displaced without --take-over.
    const refused = await fx.cli(['resume', run.id], ttl);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('run_owned');
    const taking = await startCli(fx, ['resume', run.id, '--take-over'], ttl);
    children.push(taking);
    // Bounded generously: under load a process exit takes long; what matters is that it stops and says why.
    const firstEnd = await Promise.race([first.exited, sleep(120_000).then(() => 'still running' as const)]);
    expect(firstEnd, first.stderr()).toBe(4);
    expect(first.stderr()).toContain('execution_right_lost');
    // Outside the workspace: a file written there could land in the sandbox the take-over restores
    // between its creation and its digest check, and the restore would rightly refuse it (seen in CI).
    await keepReleasing(fx, run.sessionId, taking.exited, '/tmp/release');
    expect(await taking.exited, taking.stderr()).toBe(0);
    const transitions = await fx.read((s) => s.listRunTransitions(run.id));
    expect(transitions.some((t) => t.actor === 'user:tester' && /taken over by user:tester from host/.test(t.reason))).toBe(true);
    expect(transitions.at(-1)!.to).toBe('completed');
  });

  it('a worker frozen past its lease inside a never step commits nothing when it wakes, and a berth run of another plan leaves its run alone', async () => {
    const { fx, service } = await withService((port) => [
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'deploy', run: `${post(port)} && sleep 4 && echo deployed >> steps.log`, replay: 'never' },
      { name: 'three', run: 'echo three >> steps.log' },
      // PostgreSQL, the store a fleet shares: a process frozen inside a SQLite write transaction
      // holds the one write lock of the file, and every other host's write times out behind it.
    ], await (await sharedPostgres()).createStoreDatabase('owner'));
    const submitted = await fx.cli(['run', fx.plan, '--detach', '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    const run = lastJson<{ run: Run }>(submitted).run;
    const worker = await startWorker(fx, 2000);
    children.push(worker);
    await waitFor('the deploy to happen', async () => (service.counts().deploy === 1 ? true : undefined));
    // Frozen for seconds, far less than the sandbox lease's TTL (600 s in the fixture): the
    // sandbox's watchdog (host/sandbox/lease-watchdog.ts) leaves it running, so what is tested here
    // is the ownership fence alone (the watchdog's own stop has its test in sandbox-watchdog.test.ts).
    worker.child.kill('SIGSTOP');
    const owner = (await fx.read((s) => s.getSessionOwner(run.sessionId)))!;
    expect(owner.pid).toBe(worker.pid);
    await sleep(3000);

    // Another plan on the same store: its host drives its own run only.
    const other = join(fx.dir, 'other.yaml');
    writeFileSync(other, 'name: other\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: only\n    run: "echo other"\n');
    const otherEnd = await fx.cli(['run', other, '--json']);
    expect(otherEnd.code, otherEnd.stderr).toBe(0);
    const untouched = await fx.read(async (s) => ({ run: (await s.getRun(run.id))!, tasks: await s.listTasks({ runId: run.id }), owner: await s.getSessionOwner(run.sessionId) }));
    expect(untouched.run.state).toBe('running');
    expect(untouched.tasks.every((t) => t.restarts === 0)).toBe(true);
    expect(untouched.owner!.epoch).toBe(owner.epoch);

    // Woken after its lease ran out: the renewal and the step's result (old epoch) are refused and it
    // stops all work on the run. As any host may, it then claims the run anew (a new epoch), stops
    // what is left of the old command and parks the uncertain step: the action is never repeated.
    worker.child.kill('SIGCONT');
    await waitFor('the worker to say it lost the run', async () => (/lost session/.test(worker.stderr()) ? true : undefined), 30_000);
    const parked = await runSettled(fx, run.id, 60_000);
    expect(parked.state, worker.stderr()).toBe('needs_reconciliation');
    const after = await fx.read(async (s) => ({ owner: (await s.getSessionOwner(run.sessionId))!, deploy: (await s.listTasks({ runId: run.id })).find((t) => (t.input as { index?: number }).index === 1)!, effects: await s.listEffects({ runId: run.id }) }));
    expect(after.owner.epoch).toBeGreaterThan(owner.epoch);
    // The frozen phase never committed its result: the step is interrupted, its effect still uncertain.
    expect(after.deploy.outcome).toBe('interrupted');
    expect(after.effects.filter((e) => (e.intent as { step?: string }).step === 'deploy').map((e) => [e.status, e.attempts])).toEqual([['unknown', 1]]);

    // The operator's answer is committed for the live worker, which carries it out.
    const done = await fx.cli(['reconcile', run.id, '--accept', '--json']);
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<{ owner: { live: boolean; pid: number } }>(done).owner).toMatchObject({ live: true, pid: worker.pid });
    expect(service.counts()).toEqual({ deploy: 1 });
    const end = await runSettled(fx, run.id);
    const story = await fx.read(async (s) => JSON.stringify({ transitions: (await s.listRunTransitions(run.id)).map((t) => `${t.to}: ${t.reason}`), tasks: (await s.listTasks({ runId: run.id })).map((t) => [t.kind, t.status, t.outcome, t.error?.message]) }, null, 1));
    expect(end.state, `${story}\n${worker.stderr().slice(-3000)}`).toBe('completed');
  });
});
