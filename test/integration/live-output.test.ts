import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { containerStdout } from '../support/agent-observe';
import { bundledCli, planFixture } from '../support/plan-fixture';
import { TICKING } from '../support/live-step';
import { attemptsOf } from '../../host/output';
import { STEP_KIND } from '../../host/plan';


let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await fx?.cleanup();
  fx = undefined;
}, 240_000);

/** A CLI child whose output the test reads while it runs. */
async function started(args: string[]) {
  const child = spawn(process.execPath, [await bundledCli(), ...args, '--store', fx!.store], { env: { ...process.env, BERTH_HOST_ID: fx!.hostId, BERTH_OPERATOR: 'tester' }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString('utf8')));
  const ended = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, ended, out: () => out, err: () => err };
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 150_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const runIdOf = () => until('the run', () => fx!.read(async (s) => (await s.listRuns())[0]?.id));
const containerOf = (runId: string) => until('the sandbox', () => fx!.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null && l.containerId)?.containerId));
const stepFinished = (runId: string) => fx!.read(async (s) => (await s.listTasks({ runId })).some((t) => t.kind === STEP_KIND && t.status === 'terminal'));

describe('a running step\'s output is written while it runs', { timeout: 300_000 }, () => {
  it('berth logs -f, in another process, prints each line of a step printing a line a second while the step still runs', async () => {
    fx = await planFixture([{ name: 'ticking', run: TICKING }]);
    const host = await started(['run', fx.plan]);
    const runId = await runIdOf();
    const follower = await started(['logs', runId, '-f']);
    await until('tick 3 from the follower', async () => follower.out().includes('  out │ tick 3\n'));
    // The step is still looping (it waits for the release file): the lines came while it ran.
    expect(await stepFinished(runId)).toBe(false);
    await containerStdout(fx.docker, await containerOf(runId), ['touch', '/tmp/release']);
    expect(await host.ended, host.err()).toBe(0);
    expect(await follower.ended, follower.err()).toBe(0);
    const lines = follower.out().split('\n');
    expect(lines).toContain('  out │ tick 1');
    expect(lines).toContain('  out │ tick 2');
    expect(lines).toContain('  out │ released');
    expect(lines.find((l) => l.startsWith('berth │ step ticking: exit 0 after'))).toBeDefined();
    expect(lines.at(-2)).toBe(`berth │ run ${runId} is completed`);
  });

  it('berth logs -f says when no live host drives the run any more and when a resume drives it again, and follows it on to its end', async () => {
    fx = await planFixture([{ name: 'ticking', run: TICKING }]);
    const host = await started(['run', fx.plan]);
    const runId = await runIdOf();
    const follower = await started(['logs', runId, '-f']);
    await until('tick 2 from the follower', async () => follower.out().includes('  out │ tick 2\n'));
    host.child.kill('SIGKILL');
    await host.ended;
    // Before: the follower printed nothing more and waited for ever, with no word of why.
    const gone = `berth │ run ${runId} is running, no live host`;
    await until('the follower to say the host is gone', async () => follower.out().includes(gone));
    const resumed = await started(['resume', runId]);
    await until('the follower to name the resume as the run\'s host', async () => follower.out().includes(`berth │ run ${runId} is running on host ${fx!.hostId} (pid ${resumed.child.pid})`));
    await until('a second attempt', () => fx!.read(async (s) => attemptsOf(await s.listOutput({ runId })).length === 2 && attemptsOf(await s.listOutput({ runId }))[1]!.parts.length > 0));
    await containerStdout(fx.docker, await containerOf(runId), ['touch', '/tmp/release']);
    expect(await resumed.ended, resumed.err()).toBe(0);
    expect(await follower.ended, follower.err()).toBe(0);
    const lines = follower.out().split('\n');
    const at = (prefix: string) => lines.findIndex((l) => l.startsWith(prefix));
    expect(lines[at(gone)]).toContain(`berth resume ${runId}; following on`);
    expect(at(gone)).toBeLessThan(at(`berth │ run ${runId} is running on host`));
    expect(lines.at(-2)).toBe(`berth │ run ${runId} is completed`);
  });

  it('keeps the output of a step whose host was SIGKILLed mid-step, and after resume berth logs shows it as interrupted beside the new attempt', async () => {
    fx = await planFixture([{ name: 'ticking', run: TICKING }]);
    const host = await started(['run', fx.plan]);
    const runId = await runIdOf();
    await until('tick 3 in the store', () => fx!.read(async (s) => (await s.listOutput({ runId })).some((c) => c.text.includes('tick 3'))));
    host.child.kill('SIGKILL');
    await host.ended;
    // What the killed attempt printed survived the kill.
    const kept = await fx.read((s) => s.listOutput({ runId }));
    expect(attemptsOf(kept)).toHaveLength(1);
    expect(attemptsOf(kept)[0]!.end).toBeNull();

    const resumed = await started(['resume', runId]);
    // The new attempt starts on a sandbox the resume verified (or restored): release it once it prints.
    await until('a second attempt', () => fx!.read(async (s) => attemptsOf(await s.listOutput({ runId })).length === 2 && attemptsOf(await s.listOutput({ runId }))[1]!.parts.length > 0));
    await containerStdout(fx.docker, await containerOf(runId), ['touch', '/tmp/release']);
    expect(await resumed.ended, resumed.err()).toBe(0);

    const logs = await fx.cli(['logs', runId]);
    expect(logs.code, logs.stderr).toBe(0);
    const lines = logs.stdout.split('\n');
    const cut = lines.findIndex((l) => l.startsWith('berth │ step ticking: attempt started') && l.includes('was interrupted (no end recorded: its host stopped)'));
    expect(cut, logs.stdout).toBeGreaterThanOrEqual(0);
    const done = lines.findIndex((l) => l.startsWith('berth │ step ticking: exit 0'));
    expect(done).toBeGreaterThan(cut);
    // The killed attempt's lines sit under its heading, before the finished attempt.
    expect(lines.slice(cut + 1, done)).toEqual(expect.arrayContaining(['  out │ tick 1', '  out │ tick 2', '  out │ tick 3']));
    expect(lines.slice(done)).toContain('  out │ released');
    const json = JSON.parse((await fx.cli(['logs', runId, '--json'])).stdout) as { attempts: Array<{ source: string; state: string; stdout: string }> };
    expect(json.attempts.map((a) => [a.source, a.state])).toEqual([['step:0', 'interrupted'], ['step:0', 'ended']]);
    expect(json.attempts[0]!.stdout).toContain('tick 3\n');
    expect(json.attempts[1]!.stdout).toContain('released\n');
  });
});
