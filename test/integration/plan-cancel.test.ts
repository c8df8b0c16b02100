import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { containerStdout } from '../support/agent-observe';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

// A `never` step whose side effect lands well after it starts: `late` appears only if the step's
// process outlives the cancel.
const STEPS = [
  { name: 'prepare', run: 'echo ready > ready.txt' },
  { name: 'deploy', run: 'touch began && sleep 20 && touch late', replay: 'never' as const },
  { name: 'after', run: 'touch after-ran' },
];

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** `berth run` in the background, so the test can cancel it or kill it mid-step. */
async function startRun(f: NonNullable<typeof fx>) {
  const script = await bundledCli();
  const child = spawn(process.execPath, [script, 'run', f.plan, '--store', f.store, '--json'], { env: { ...process.env, BERTH_HOST_ID: f.hostId, BERTH_OPERATOR: 'tester' }, stdio: 'ignore' });
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  return { child, ended };
}

const exists = async (f: NonNullable<typeof fx>, containerId: string, file: string) =>
  (await containerStdout(f.docker, containerId, ['sh', '-c', `test -e /workspace/${file} && echo yes || echo no`])).trim() === 'yes';

/** Waits until the `never` step's process is running in the sandbox; returns the run and its container. */
async function stepRunning(f: NonNullable<typeof fx>) {
  for (;;) {
    const found = await f.read(async (s) => ({ run: (await s.listRuns())[0], lease: (await s.listLeases({})).find((l) => l.releasedAt === null && l.containerId !== '') }));
    if (found.run && found.lease && (await exists(f, found.lease.containerId, 'began'))) return { runId: found.run.id, containerId: found.lease.containerId };
    await sleep(200);
  }
}

/** Waits until no process of the deploy step's command (its shell or its sleep) is left in the sandbox. */
async function commandGone(f: NonNullable<typeof fx>, containerId: string) {
  for (const until = Date.now() + 120_000; ; await sleep(200)) {
    const ps = await containerStdout(f.docker, containerId, ['ps', '-o', 'args']);
    if (!ps.includes('touch late') && !ps.includes('sleep 20')) return;
    if (Date.now() > until) throw new Error(`the step's command still runs in the sandbox:\n${ps}`);
  }
}

/** The story a cancel mid-step must tell, whichever host applied it. */
async function expectCancelledMidStep(f: NonNullable<typeof fx>, runId: string, containerId: string) {
  const run = await f.read((s) => s.getRun(runId));
  // The step may have done its side effect: the run cannot just be `cancelled`.
  expect(run!.state).toBe('needs_reconciliation');
  const tasks = await f.read((s) => s.listTasks({ runId }));
  const steps = tasks.filter((t) => t.kind === 'plan-step');
  expect(steps).toHaveLength(2);
  const deploy = steps[1]!;
  expect(deploy.outcome).toBe('cancelled');
  const effects = await f.read((s) => s.listEffects({ runId }));
  const deployEffect = effects.find((e) => e.id === `${runId}:step:1:g0`)!;
  expect(deployEffect.status).toBe('unknown');
  expect(deploy.result).toEqual({ cancelled: { effect: 'unknown', effectIds: [deployEffect.id] } });
  expect(tasks.find((t) => t.kind === 'plan')!.outcome).toBe('cancelled');
  // The step's process was stopped: once nothing of its command is left in the sandbox, its side
  // effect never appeared (a command that was not stopped is gone only after writing it), and
  // nothing after it ran. Waited for as a state, not by sitting out the step's 20 s.
  await commandGone(f, containerId);
  expect(await exists(f, containerId, 'late')).toBe(false);
  expect(await exists(f, containerId, 'after-ran')).toBe(false);
  // Once the operator settles the effect, the run ends as what it is: cancelled.
  const accept = await f.cli(['reconcile', runId, '--accept', '--json']);
  expect(accept.code, accept.stderr).toBe(0);
  expect(lastJson<{ run: Run }>(accept).run.state).toBe('cancelled');
  expect((await f.read((s) => s.getEffect(deployEffect.id)))!.receipt).toMatchObject({ type: 'operator-decision', decision: 'accept', by: 'user:tester' });
}

/**
 * Starts `berth run` of a plan whose second step is `deploy` and has the sandbox paused exactly
 * between the first step's end and deploy's command, with no timing: the run's secret (granted to
 * deploy) is a FIFO served here, and the container is paused (`docker pause`, as a snapshot commit
 * of another process pauses it) before the answer to the first read made once the first step is
 * confirmed, which is deploy's: its command cannot be asked for before that answer.
 */
async function runPausedBeforeDeploy(f: NonNullable<typeof fx>) {
  const fifo = join(f.dir, 'token.fifo');
  execFileSync('mkfifo', [fifo]);
  const envFile = join(f.dir, 'env.yaml');
  writeFileSync(envFile, readFileSync(envFile, 'utf8') + `secrets:\n  - { name: TOKEN, from: { file: ${fifo} }, expose: env, to: [deploy] }\n`);
  writeFileSync(f.plan, readFileSync(f.plan, 'utf8').replace('  - name: deploy\n', '  - name: deploy\n    secrets: [TOKEN]\n'));
  const { child, ended } = await startRun(f);
  let paused = '';
  let serving = true;
  let onPaused = () => undefined as void;
  const pausedNow = new Promise<void>((resolve) => (onPaused = resolve));
  const served = (async () => {
    while (serving) {
      const w = await open(fifo, 'w');
      try {
        if (!paused && serving) {
          const state = await f.read(async (s) => ({ effects: await s.listEffects({}), lease: (await s.listLeases({})).find((l) => l.releasedAt === null && l.containerId !== '') }));
          if (state.lease && state.effects.some((e) => e.id.endsWith(':step:0:g0') && e.status === 'confirmed')) {
            paused = state.lease.containerId;
            execFileSync('docker', ['pause', paused]);
            onPaused();
          }
        }
        // EPIPE: the reader was the previous one, leaving after its end of file.
        await w.writeFile('tok').catch(() => undefined);
      } finally {
        await w.close();
      }
    }
  })();
  await pausedNow;
  const runId = await f.read(async (s) => (await s.listRuns())[0]!.id);
  const deployId = `${runId}:step:1:g0`;
  return {
    child,
    ended,
    runId,
    deployId,
    containerId: paused,
    /** Whether the engine still has the container. */
    exists: () => execFileSync('docker', ['ps', '-aq', '--no-trunc', '--filter', `id=${paused}`], { encoding: 'utf8' }).trim() !== '',
    /** Whether the engine still has the container paused. */
    isPaused: () => JSON.parse(execFileSync('docker', ['inspect', '-f', '{{json .State.Paused}}', paused], { encoding: 'utf8' })) as boolean,
    /** Resolves once deploy's effect is `executing`: marked just before its command is asked of the engine. */
    async deployAsked() {
      while ((await f.read((s) => s.getEffect(deployId)))?.status !== 'executing') await sleep(100);
    },
    /** Unpauses the sandbox and stops serving the secret from the FIFO. */
    async end() {
      // A run that ended removes its sandbox, paused or not.
      if (this.exists()) execFileSync('docker', ['unpause', paused]);
      serving = false;
      // Ends the server's wait for a reader that is not coming (it may be just about to wait).
      for (let over = false; !over; ) {
        closeSync(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK));
        over = await Promise.race([served.then(() => true), sleep(50).then(() => false)]);
      }
      // A plain file from now on, for the reads of a resume.
      unlinkSync(fifo);
      writeFileSync(fifo, 'tok');
    },
  };
}

/** Everything the store records of a run, as one text: tasks, effects and live output. */
const recordText = (f: NonNullable<typeof fx>, runId: string) =>
  f.read(async (s) => JSON.stringify({ tasks: await s.listTasks({ runId }), effects: await s.listEffects({ runId }), output: await s.listOutput({ runId }) }));

describe('cancel tells one story, with or without a live host', { timeout: 240_000 }, () => {
  it('a cancel while the host runs a never step kills it and records the step cancelled with its effect unknown; the run needs reconciliation, and ends cancelled once accepted', async () => {
    fx = await planFixture(STEPS);
    const { ended } = await startRun(fx);
    const { runId, containerId } = await stepRunning(fx);
    const cancel = await fx.cli(['cancel', runId, '--json']);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect((await ended).code).toBe(3);
    await expectCancelledMidStep(fx, runId, containerId);
  });

  it('a cancel while no host runs is carried out by berth cancel itself: the old step process is killed before anything is recorded, and the records tell the same story', async () => {
    fx = await planFixture(STEPS);
    const { child, ended } = await startRun(fx);
    const { runId, containerId } = await stepRunning(fx);
    child.kill('SIGKILL');
    expect((await ended).signal).toBe('SIGKILL');
    // Before: exit 0 with the run left `cancelling` and the step's command running in the sandbox until a resume.
    const cancel = await fx.cli(['cancel', runId]);
    expect(cancel.code, cancel.stderr).toBe(3);
    expect(cancel.stderr).toContain('no live host drives it, so this one carries it out');
    // What it found is said in words, not as a raw log line (before: {"level":40,...,"msg":"stopped what ..."}).
    expect(cancel.stderr).toContain('berth: warning: stopped what an earlier host left running in the sandbox');
    expect(cancel.stderr).not.toContain('"level":');
    // Said as the cancel it is (before: 'resuming run R (cancelling) ...: continuing in it' and 'continued in the same sandbox').
    expect(cancel.stderr).toContain(`carrying out the cancel of run ${runId} as its owner`);
    expect(cancel.stderr).toContain('stopping what still runs in it');
    expect(cancel.stderr + cancel.stdout).not.toMatch(/resuming run|continuing in it|continued in the same sandbox/);
    await expectCancelledMidStep(fx, runId, containerId);
  });

  it('a cancelled safe step in a sandbox with no network changed nothing outside the run: the run ends cancelled without asking anybody, with or without a live host', async () => {
    const safe = [STEPS[0]!, { name: 'build', run: 'touch began && sleep 20 && touch late', replay: 'safe' as const }, STEPS[2]!];
    for (const live of [true, false]) {
      fx = await planFixture(safe);
      const { child, ended } = await startRun(fx);
      const { runId, containerId } = await stepRunning(fx);
      if (!live) {
        child.kill('SIGKILL');
        await ended;
      }
      const cancel = await fx.cli(['cancel', runId, '--json']);
      expect(cancel.code, cancel.stderr).toBe(0);
      if (live) await ended;
      // Before: needs_reconciliation, on the question whether a step that could reach nothing outside its sandbox happened.
      const run = await fx.read((s) => s.getRun(runId));
      expect(run!.state, `live host: ${live}`).toBe('cancelled');
      const effect = await fx.read((s) => s.getEffect(`${runId}:step:1:g0`));
      expect(effect).toMatchObject({ status: 'failed', error: { code: 'cancelled_not_applied' } });
      const build = (await fx.read((s) => s.listTasks({ runId }))).find((t) => t.kind === 'plan-step' && (t.input as { index?: number }).index === 1)!;
      expect(build.result).toEqual({ cancelled: { effect: 'before', effectIds: [effect!.id] } });
      const check = await fx.cli(['check', runId, '--json']);
      expect(check.code, check.stdout + check.stderr).toBe(0);
      if (!live) {
        // Its --json says the sandbox was stopped, not continued in (before: did.action 'continued').
        expect(lastJson<{ resume: { sandbox: { did: { action: string } } } }>(cancel).resume.sandbox.did.action).toBe('stopped');
        // No container of the run is left running the step's command.
        const containers = await fx.docker.listContainers({ all: true, filters: { label: [`berth.run=${runId}`] } });
        for (const c of containers.filter((c) => c.State === 'running')) expect(await exists(fx, c.Id, 'late')).toBe(false);
      }
      void containerId;
      await fx.cleanup();
      fx = undefined;
    }
  });

  it('a cancel that reaches a never step waiting for its paused sandbox settles it as not sent (nothing ran): the run ends cancelled without asking anybody, never with a broken sandbox', async () => {
    fx = await planFixture([STEPS[0]!, { name: 'deploy', run: 'touch began', replay: 'never' }, STEPS[2]!]);
    const f = fx;
    const p = await runPausedBeforeDeploy(f);
    try {
      await p.deployAsked();
      const cancel = await f.cli(['cancel', p.runId, '--json']);
      expect(cancel.code, cancel.stderr).toBe(0);
      // A cancelled run is not berth run's success (1); before, it waited for an operator (3).
      expect((await p.ended).code).toBe(1);
      // Removed while still paused, as the test never unpaused it: nothing ran in it after the pause.
      expect(p.exists()).toBe(false);
    } finally {
      await p.end();
    }
    expect((await f.read((s) => s.getRun(p.runId)))!.state).toBe('cancelled');
    const tasks = await f.read((s) => s.listTasks({ runId: p.runId }));
    expect(tasks.find((t) => t.kind === 'plan-step' && (t.input as { index?: number }).index === 1)!.outcome).toBe('cancelled');
    expect(tasks.find((t) => t.kind === 'plan')!.outcome).toBe('cancelled');
    // Before: the effect's error was sandbox_unavailable ("the sandbox container cannot run
    // commands (HTTP 409)"), then step_cancelled with the effect unknown.
    const record = await recordText(f, p.runId);
    expect(record).not.toContain('sandbox_unavailable');
    expect(record).not.toContain('HTTP 409');
    expect(record).toContain('cancelled before it started');
    expect(await f.read((s) => s.getEffect(p.deployId))).toMatchObject({ status: 'failed', error: { code: 'step_not_started', delivery: 'not_sent' } });
  });

  it('a Ctrl-C while a never step waits for its paused sandbox stops the host as any Ctrl-C does, and berth resume runs the step once without asking', async () => {
    // replay never: the step was provably not started, so the resume needs no operator (it used to park the run).
    fx = await planFixture([STEPS[0]!, { name: 'deploy', run: 'echo x >> began && cat began', replay: 'never' }, STEPS[2]!]);
    const f = fx;
    const p = await runPausedBeforeDeploy(f);
    try {
      await p.deployAsked();
      p.child.kill('SIGINT');
      expect((await p.ended).code).toBe(130);
      expect(p.isPaused()).toBe(true);
    } finally {
      await p.end();
    }
    // Before: the step's output ended "stopped: the sandbox container cannot run commands (HTTP 409)".
    expect(await recordText(f, p.runId)).not.toContain('HTTP 409');
    expect(await exists(f, p.containerId, 'began')).toBe(false);
    const resumed = await f.cli(['resume', p.runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    expect((await f.read((s) => s.getRun(p.runId)))!.state).toBe('completed');
    const record = await recordText(f, p.runId);
    expect(record).not.toContain('sandbox_unavailable');
    expect(record).not.toContain('HTTP 409');
    // It ran once: it appends to a file and prints it.
    const deploy = (await f.read((s) => s.listTasks({ runId: p.runId }))).find((t) => t.kind === 'plan-step' && (t.input as { index?: number }).index === 1)!;
    expect(deploy.result).toMatchObject({ exitCode: 0, stdoutTail: 'x\n' });
  });
});
