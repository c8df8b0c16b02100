import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Lease, LeaseRecord } from '../../host/sandbox';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

/** Starts the exec child, waits for its lease line, then SIGKILLs its whole tree. */
async function crashedHost(sandbox: SandboxWorld, mode: 'running' | 'ended'): Promise<LeaseRecord> {
  const child = spawn('npx', ['tsx', 'test/support/sandbox-exec-child.ts', sandbox.storePath, sandbox.hostId, sandbox.imageId, mode, '4'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`child exited early with ${c}`)));
  });
  process.kill(-child.pid!, 'SIGKILL');
  await new Promise((r) => child.once('exit', r));
  return JSON.parse(line) as LeaseRecord;
}

const args = async (lease: Lease) => (await lease.exec(['ps', '-o', 'args'])).stdout;

describe('commands an earlier host started', () => {
  test('a new owner stops the still-running command of a SIGKILLed host at once, reports its tag as killed and leaves the kept service', async ({ sandbox }) => {
    const record = await crashedHost(sandbox, 'running');
    await using lease = await sandbox.host.attach(sandbox.spec(), record);
    const report = await lease.stopEarlierCommands();
    expect(report.outcome).toBe('stopped');
    expect(report.commands).toEqual(expect.arrayContaining([expect.objectContaining({ tag: 'task_run:a1', state: 'killed' })]));
    expect(report.commands.find((c) => c.tag === 'task_run:a1')).not.toHaveProperty('exitCode');
    expect(report.kept).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'sleep' })]));
    // Right away: nothing of the command runs, the service does.
    const ps = await args(lease);
    expect(ps).not.toMatch(/sleep 4/);
    expect(ps).toMatch(/sleep 606/);
    // After the command's sleep would have ended, it never wrote its marker.
    await sleep(5000);
    expect((await lease.exec(['sh', '-c', 'test -e /workspace/marker && echo marker || echo none'])).stdout.trim()).toBe('none');
  }, 90_000);

  test('a new owner reports a command that ended before its host died with its exit code', async ({ sandbox }) => {
    const record = await crashedHost(sandbox, 'ended');
    await using lease = await sandbox.host.attach(sandbox.spec(), record);
    const report = await lease.stopEarlierCommands();
    expect(report.outcome).toBe('stopped');
    expect(report.commands).toEqual([expect.objectContaining({ tag: 'task_end:a1', state: 'ended', exitCode: 7 })]);
    // Asking again stops nothing new and says the same.
    const again = await lease.stopEarlierCommands();
    expect(again.commands).toEqual(report.commands);
  }, 90_000);
});
