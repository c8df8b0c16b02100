import { setTimeout as sleep } from 'node:timers/promises';
import { runControl } from '../../host/sandbox/sandbox-control';
import { containerStdout } from '../support/agent-observe';
import { describe, expect, test } from '../support/sandbox-fixture';

// The engine pauses a sandbox for the length of a paused `docker commit` (a snapshot) and unpauses
// it when the commit ends. Another process (a `berth cancel` with no live host, a new owner
// stopping an old host's commands, an operator's probe) can reach the sandbox in that moment.
describe('a sandbox paused by a snapshot commit', { timeout: 120_000 }, () => {
  test('a command started while the sandbox is paused waits for the pause to end and runs', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const container = sandbox.docker.getContainer(lease.containerId);
    await container.pause();
    const unpaused = sleep(1_000).then(() => container.unpause());
    const r = await lease.exec('echo ran');
    await unpaused;
    expect(r).toMatchObject({ exitCode: 0, stdout: 'ran\n' });
  });

  test("an earlier host's commands, stopped while the sandbox is paused, are killed once it resumes, not skipped as if it had stopped", async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const container = sandbox.docker.getContainer(lease.containerId);
    // A leftover of the command user, started outside any wrapper: what an earlier host's step left.
    const exec = await container.exec({ Cmd: ['sleep', '600'], User: '1000:1000' });
    await exec.start({ Detach: true });
    const running = async () => (await containerStdout(sandbox.docker, lease.containerId, ['ps'])).includes('sleep 600');
    while (!(await running())) await sleep(50);
    await container.pause();
    const unpaused = sleep(1_000).then(() => container.unpause());
    const report = await runControl(container, { user: '1000:1000', action: { mode: 'earlier', spare: [] } });
    await unpaused;
    expect(report).toMatchObject({ found: true, complete: true });
    expect(report.killed).toBeGreaterThanOrEqual(1);
    expect(await running()).toBe(false);
  });

  test('a command cancelled while it waits for the pause to end is not started and comes back cancelled, not as a broken sandbox', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const container = sandbox.docker.getContainer(lease.containerId);
    await container.pause();
    const ac = new AbortController();
    // exec checks its signal before its first await: this abort finds it past that check, on its
    // way to (or in) the wait for the pause, whichever the machine's load made it.
    const ran = lease.exec('touch marker', { signal: ac.signal });
    ac.abort(new Error('berth cancel'));
    const r = await ran;
    expect((await container.inspect()).State.Paused).toBe(true);
    expect(r).toMatchObject({ cancelled: true, notStarted: true, exitCode: -1, sandboxLost: false });
    await container.unpause();
    expect(lease.lost).toBe(false);
    expect(await lease.exec('test -e marker && echo started || echo absent')).toMatchObject({ exitCode: 0, stdout: 'absent\n' });
  });

  test('a command cancelled while its exec is being set up, the sandbox running, is not started: the wrapper never gets its line', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const ac = new AbortController();
    // Past exec's first check (see above), before any listener is armed: the engine calls go on.
    // Before, the exec was started and the cancel only killed a command that had already run.
    const ran = lease.exec('touch marker', { signal: ac.signal });
    ac.abort(new Error('berth cancel'));
    expect(await ran).toMatchObject({ cancelled: true, notStarted: true, exitCode: -1, sandboxLost: false });
    expect(lease.lost).toBe(false);
    expect(await lease.exec('test -e marker && echo started || echo absent')).toMatchObject({ exitCode: 0, stdout: 'absent\n' });
    // The wrapper that was never told to start is gone too, not waiting for its line.
    const wrappers = await lease.exec("ps -o args | grep -c '^/bin/sh -c # berth-exec' || true");
    expect(wrappers.stdout.trim()).toBe('1');
  });
});
