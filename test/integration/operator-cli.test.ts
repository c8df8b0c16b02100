import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';

// The operator's view through the real CLI: child processes on a real SQLite store and engine.
type Fixture = Awaited<ReturnType<typeof planFixture>>;
let fx: Fixture | undefined;
let w: CliWorld | undefined;
afterEach(async () => {
  await fx?.cleanup();
  await w?.cleanup();
  fx = undefined;
  w = undefined;
});

/** `berth ARGS` in the background, to be stopped or killed; its end is awaited from the start. */
async function background(f: Fixture, args: string[]) {
  const child = spawn(process.execPath, [await bundledCli(), ...args, '--store', f.store], { env: { ...process.env, BERTH_HOST_ID: f.hostId, BERTH_OPERATOR: 'tester' } });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.resume();
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const waitFor = async (text: string) => {
    for (let waited = 0; !stderr.includes(text); waited += 50) {
      if (waited > 120_000) throw new Error(`never printed "${text}":\n${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, exited, waitFor, stderr: () => stderr };
}

interface StatusJson {
  runs: Array<{ id: string; state: string; owner: { hostId: string; pid: number | null; lastHeartbeatAt: number; stoppedAt: number | null; live: boolean } | null }>;
}

describe('what status and show say about who drives a run', { timeout: 300_000 }, () => {
  it('status and show tell a run a live host drives from a run nothing drives, after SIGKILL and after Ctrl-C', async () => {
    fx = await planFixture([{ name: 'slow', run: 'sleep 60' }]);
    const host = await background(fx, ['run', fx.plan]);
    await host.waitFor('▶ [1/1] slow');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);

    const live = await fx.cli(['status', '--json']);
    expect(live.code, live.stderr).toBe(0);
    const liveRun = lastJson<StatusJson>(live).runs.find((r) => r.id === runId)!;
    expect(liveRun.owner).toMatchObject({ hostId: fx.hostId, pid: host.child.pid, live: true, stoppedAt: null });
    expect(typeof liveRun.owner!.lastHeartbeatAt).toBe('number');
    expect((await fx.cli(['status'])).stdout).toContain(`running on host ${fx.hostId} (pid ${host.child.pid}) (heartbeat`);
    expect((await fx.cli(['show', runId])).stdout).toContain(`running on host ${fx.hostId}`);

    host.child.kill('SIGKILL');
    await host.exited;
    const dead = await fx.cli(['status']);
    expect(dead.stdout).toContain('running, no live host (stopped');
    expect(dead.stdout).toContain(`berth resume ${runId}`);
    expect(lastJson<StatusJson>(await fx.cli(['status', '--json'])).runs[0]!.owner).toMatchObject({ hostId: fx.hostId, live: false });
    const shown = await fx.cli(['show', runId, '--json']);
    expect(lastJson<{ owner: { live: boolean } }>(shown).owner.live).toBe(false);
    expect((await fx.cli(['show', runId])).stdout).toContain(`no live host (stopped`);

    // Ctrl-C: the host stops cleanly and says so in the store at once.
    const resumed = await background(fx, ['resume', runId]);
    await resumed.waitFor('resuming run');
    for (let i = 0; i < 600 && !lastJson<StatusJson>(await fx.cli(['status', '--json'])).runs[0]!.owner?.live; i++) await new Promise((r) => setTimeout(r, 100));
    resumed.child.kill('SIGINT');
    expect(await resumed.exited).toBe(130);
    const stopped = lastJson<StatusJson>(await fx.cli(['status', '--json'])).runs[0]!;
    expect(stopped.state).toBe('running');
    expect(stopped.owner).toMatchObject({ live: false, pid: resumed.child.pid });
    expect(stopped.owner!.stoppedAt).not.toBeNull();
    expect((await fx.cli(['status'])).stdout).toContain(`no live host (stopped`);
  });
});

describe('read commands and a store that is not there', { timeout: 120_000 }, () => {
  it('show, status, resume, logs, reconcile, approve, deny, cancel and gc say "no store at PATH" and create nothing, naming the default path', async () => {
    const { mkdtempSync, existsSync, readdirSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { execFile } = await import('node:child_process');
    const dir = mkdtempSync(join(tmpdir(), 'berth-nostore-'));
    const bin = await bundledCli();
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const env: NodeJS.ProcessEnv = { ...process.env, BERTH_HOST_ID: `nostore-${process.pid}` };
        delete env.BERTH_STORE;
        execFile(process.execPath, [bin, ...args], { cwd: dir, env }, (err, _out, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr }));
      });
    try {
      const typo = join(dir, 'sub', 'typo.db');
      for (const args of [['show', 'run_x'], ['status'], ['resume', 'run_x'], ['logs', 'run_x'], ['reconcile', 'run_x', '--accept'], ['approve', 'run_x', 'call_1'], ['deny', 'run_x', 'call_1'], ['cancel', 'run_x'], ['gc']]) {
        const flagged = await run([...args, '--store', typo]);
        expect(flagged.code, `${args.join(' ')}: ${flagged.stderr}`).toBe(1);
        expect(flagged.stderr).toContain(`no store at ${typo}`);
        expect(flagged.stderr).toContain(join(dir, '.berth', 'berth.db'));
        const byDefault = await run(args);
        expect(byDefault.code, byDefault.stderr).toBe(1);
        expect(byDefault.stderr).toContain(`no store at ${join(dir, '.berth', 'berth.db')}`);
      }
      expect(existsSync(join(dir, 'sub'))).toBe(false);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('errors caught before a run exists', { timeout: 300_000 }, () => {
  it('berth run and berth agent refuse an image digest this engine lacks before creating a run, with the fix and no stack trace; env validate --engine checks it too', async () => {
    const { readFileSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    fx = await planFixture([{ name: 'one', run: 'true' }]);
    const envFile = join(fx.dir, 'env.yaml');
    writeFileSync(envFile, readFileSync(envFile, 'utf8').replace(/sha256:[0-9a-f]{64}/, `sha256:${'0'.repeat(64)}`));
    const noStack = (text: string) => expect(text).not.toMatch(/\n\s+at .+:\d+:\d+/);

    const run = await fx.cli(['run', fx.plan]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('image_missing');
    expect(run.stderr).toContain(`berth env lock ${envFile}`);
    noStack(run.stdout + run.stderr);

    const agent = await fx.cli(['agent', 'hello', '--env', envFile, '--api-key-env', 'PREFLIGHT_KEY', '--base-url', 'http://127.0.0.1:9/v1'], { PREFLIGHT_KEY: 'k' });
    expect(agent.code, agent.stderr).toBe(1);
    expect(agent.stderr).toContain(`berth env lock ${envFile}`);
    noStack(agent.stdout + agent.stderr);
    expect(await fx.read((s) => s.listRuns())).toEqual([]);

    expect((await fx.cli(['env', 'validate', envFile])).code).toBe(0);
    const engine = await fx.cli(['env', 'validate', envFile, '--engine']);
    expect(engine.code, engine.stderr).toBe(1);
    expect(engine.stderr).toContain(`berth env lock ${envFile}`);
  });
});

describe('berth env lock keeps the pin beside the manifest', { timeout: 120_000 }, () => {
  it('writes env.lock.json and leaves the tracked manifest byte for byte as it was; the loader reads the pin from it; the example lock is git-ignored', async () => {
    const { existsSync, readFileSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { execFileSync } = await import('node:child_process');
    const { loadEnvironment } = await import('../../environment');
    fx = await planFixture([{ name: 'one', run: 'true' }]);
    const envFile = join(fx.dir, 'env.yaml');
    const pinned = /sha256:[0-9a-f]{64}/.exec(readFileSync(envFile, 'utf8'))![0];
    const unpinned = readFileSync(envFile, 'utf8').replace(/, digest: "sha256:[0-9a-f]{64}"/, '');
    writeFileSync(envFile, unpinned);
    expect((await loadEnvironment(envFile)).image.digest).toBeUndefined();

    const locked = await fx.cli(['env', 'lock', envFile]);
    expect(locked.code, locked.stderr).toBe(0);
    expect(locked.stdout).toContain(join(fx.dir, 'env.lock.json'));
    expect(readFileSync(envFile, 'utf8')).toBe(unpinned);
    expect(JSON.parse(readFileSync(join(fx.dir, 'env.lock.json'), 'utf8'))).toMatchObject({ image: { ref: 'berth/tiny:latest', digest: pinned } });
    expect((await loadEnvironment(envFile)).image.digest).toBe(pinned);
    const valid = await fx.cli(['env', 'validate', envFile, '--engine']);
    expect(valid.code, valid.stderr).toBe(0);
    expect(existsSync(join(fx.dir, 'env.lock.json'))).toBe(true);

    // The README's first command locks examples/c-hello/env.yaml: its lock must not dirty a clone.
    expect(execFileSync('git', ['check-ignore', 'examples/c-hello/env.lock.json']).toString().trim()).toBe('examples/c-hello/env.lock.json');
  });
});

describe('the final table after an operator decision', { timeout: 300_000 }, () => {
  it('after --accept completes a run, the step the operator vouched for reads "accepted by user:NAME", not interrupted', async () => {
    fx = await planFixture([
      { name: 'build', run: 'echo build >> steps.log' },
      { name: 'deploy', run: 'echo deploy >> steps.log', replay: 'never' },
      { name: 'check', run: 'cat steps.log' },
    ]);
    fx.allowLeftovers('the kill before the never step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect((await fx.cli(['resume', runId])).code).toBe(3);
    const done = await fx.cli(['reconcile', runId, '--accept']);
    expect(done.code, done.stderr).toBe(0);
    const row = done.stdout.split('\n').find((l) => l.startsWith('deploy'));
    expect(row, done.stdout).toMatch(/^deploy\s+accepted by user:tester\s/);
    // A resume of the completed run runs nothing again and says so (it said it was restoring the sandbox).
    const again = await fx.cli(['resume', runId]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('it already ended (completed): nothing is run again and no sandbox is restored');
    expect(again.stderr).not.toContain('restoring');
    expect(await fx.read((s) => s.listEffects({ runId })).then((es) => es.length)).toBe(3);
  });
});

describe('berth resume of a run a killed host had just ended', { timeout: 300_000 }, () => {
  it('settles the tasks the host killed right after reconcile --fail left live, says so and exits 0; a resume of the settled run ends 1 as before', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'deploy', run: 'echo deployed >> steps.log', replay: 'never' },
    ]);
    fx.allowLeftovers('the kill before the deploy step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    expect((await fx.cli(['run', fx.plan], { BERTH_FAULT: 'before:phase.complete:plan-step#2' })).signal).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect((await fx.cli(['resume', runId])).code).toBe(3);
    const killed = await fx.cli(['reconcile', runId, '--fail'], { BERTH_FAULT: 'after:reconcile.fail' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const root = async () => fx!.read(async (s) => (await s.getTask((await s.getRun(runId))!.rootTaskId!))!);
    expect((await root()).status).toBe('waiting');

    // Before: exit 1, "it already ended (failed): nothing is run again ..." and "berth: run RUN is failed", its root settled all the same.
    const resumed = await fx.cli(['resume', runId]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(await root()).toMatchObject({ status: 'terminal', outcome: 'cancelled' });
    const said = resumed.stderr + resumed.stdout;
    expect(said).toContain(`it already ended (failed) with 1 task a stopped host left live: settling it`);
    expect(said).toContain(`settled the 1 task a stopped host left live in ended run ${runId}: ${(await root()).id} (cancelled)`);
    expect(resumed.stderr).not.toContain(`berth: run ${runId} is failed`);
    expect((await fx.read((s) => s.listLeases({ runId }))).filter((l) => l.releasedAt === null)).toEqual([]);

    const again = await fx.cli(['resume', runId, '--json']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`berth: run ${runId} is failed`);
    expect(lastJson<{ resume: { leftovers: unknown } }>(again).resume.leftovers).toBeNull();
  });
});

describe('berth resume of an ended run whose session has an unfinished run', { timeout: 300_000 }, () => {
  it('does not take the session (which would carry on the other run and decide its call in flight): it says the run ended and names the commands for the other one', async () => {
    w = await cliWorld([{ content: 'First answer.' }, { toolCalls: [{ name: 'exec', arguments: { command: 'echo sent >> /tmp/sent.log' } }] }]);
    const first = lastJson<{ run: { id: string; sessionId: string } }>(await w.cli([...w.agentArgs('first question'), '--json']));
    const { id: done, sessionId } = first.run;
    // The next message's host is killed with its call in flight: nobody knows whether it ran.
    const killed = await w.cli(['chat', sessionId, 'send it'], { BERTH_FAULT: 'after:effect.begin:agent-tool' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const open = await w.read(async (s) => (await s.listRuns({ sessionId })).find((r) => r.id !== done)!.id);
    const before = await w.read(async (s) => ({ owner: (await s.getSessionOwner(sessionId))!.epoch, effects: (await s.listEffects({ runId: open })).map((e) => e.status) }));
    expect(before.effects).toEqual(['executing']);

    // Before: the resume of the completed run claimed the session, whose kernel took the other run's call in flight up too.
    const resumed = await w.cli(['resume', done]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout + resumed.stderr).toContain(`run ${done} already ended (completed): nothing is run again. Its session's run ${open} is unfinished and was not driven here: berth resume ${open} continues it, berth cancel ${open} stops it`);
    const after = await w.read(async (s) => ({ owner: (await s.getSessionOwner(sessionId))!.epoch, effects: (await s.listEffects({ runId: open })).map((e) => e.status), state: (await s.getRun(open))!.state }));
    expect(after).toEqual({ ...before, state: 'running' });
  });
});

describe('berth logs tells what the operator decided', { timeout: 300_000 }, () => {
  it('berth logs of a run parked after a kill and settled by --reject-effect shows the park and the decision with who made it, and no command printed a raw log line without --debug', async () => {
    fx = await planFixture([
      { name: 'build', run: 'echo build >> steps.log' },
      { name: 'deploy', run: 'echo deploy >> steps.log', replay: 'never' },
    ]);
    fx.allowLeftovers('the kill before the never step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const parked = await fx.cli(['resume', runId]);
    expect(parked.code, parked.stderr).toBe(3);
    const done = await fx.cli(['reconcile', runId, '--reject-effect']);
    expect(done.code, done.stderr).toBe(0);
    const logs = await fx.cli(['logs', runId]);
    expect(logs.code, logs.stderr).toBe(0);
    const lines = logs.stdout.split('\n');
    const park = lines.findIndex((l) => / running -> needs_reconciliation by /.test(l));
    const decided = lines.findIndex((l) => / needs_reconciliation -> reconciling by user:tester: operator: /.test(l));
    expect(park, logs.stdout).toBeGreaterThanOrEqual(0);
    expect(decided, logs.stdout).toBeGreaterThan(park);
    const json = JSON.parse((await fx.cli(['logs', runId, '--json'])).stdout) as { decisions: Array<{ from: string; to: string; actor: string }> };
    expect(json.decisions).toContainEqual(expect.objectContaining({ from: 'needs_reconciliation', to: 'reconciling', actor: 'user:tester' }));
    // Log lines reach the console as `berth: warning: ...` sentences; pino's JSON is for --debug.
    for (const out of [parked, done, logs]) expect(out.stderr + out.stdout).not.toMatch(/^\{"level":/m);
  });
});

describe('every non-zero exit says why', { timeout: 300_000 }, () => {
  it('a plan run that fails ends 1 with the reason on stderr, also with --json (stdout stays JSON)', async () => {
    fx = await planFixture([{ name: 'broken', run: 'echo nope >&2; exit 7' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code).toBe(1);
    const runId = lastJson<{ run: { id: string; state: string } }>(end).run.id;
    expect(end.stderr).toMatch(new RegExp(`berth: run ${runId} is failed: .+`));
  });
});

describe('stack traces are for --debug', { timeout: 120_000 }, () => {
  it('an unexpected error prints its message and how to see more; --debug adds the stack trace', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { runNode } = await import('../support/child');
    const dir = mkdtempSync(join(tmpdir(), 'berth-debug-'));
    try {
      // An extension whose factory throws a plain Error: not a Berth error (a directory given as a
      // manifest once served here, until it became manifest_unreadable).
      const ext = join(dir, 'ext.mjs');
      writeFileSync(ext, "export default () => { throw new Error('boom in the extension'); };\n");
      const args = ['status', '--store', join(dir, 'berth.db'), '--extension', ext];
      const plain = await runNode(await bundledCli(), args);
      expect(plain.code).toBe(1);
      expect(plain.stderr).toContain('internal error: boom in the extension');
      expect(plain.stderr).toContain('--debug');
      expect(plain.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/);
      const debug = await runNode(await bundledCli(), [...args, '--debug']);
      expect(debug.code).toBe(1);
      expect(debug.stderr).toMatch(/\n\s+at .+:\d+:\d+/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
