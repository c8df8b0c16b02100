import type { Lease } from '../../host/sandbox';
import { describe, expect, test } from '../support/sandbox-fixture';

const args = async (lease: Lease) => (await lease.exec(['ps', '-o', 'args'])).stdout;
const detached = (n: number) => `setsid sleep ${n} </dev/null >/dev/null 2>&1 &`;

describe('no process outlives its command, setsid or not', () => {
  test('a setsid sleep and a double-forked setsid daemon are gone when their command ends, whether it succeeded, failed or timed out', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    expect((await lease.exec(['sh', '-c', `${detached(601)} (setsid sh -c "sleep 602" </dev/null >/dev/null 2>&1 &); echo ok`])).exitCode).toBe(0);
    expect(await args(lease)).not.toMatch(/sleep 60[12]/);
    expect((await lease.exec(['sh', '-c', `${detached(603)} exit 3`])).exitCode).toBe(3);
    const timedOut = await lease.exec(['sh', '-c', `${detached(604)} sleep 30`], { timeoutMs: 1000 });
    expect(timedOut.timedOut).toBe(true);
    expect(await args(lease)).not.toMatch(/sleep (60[34]|30)/);
  }, 60_000);

  test('keepProcesses keeps a setsid service for later commands, whose own setsid leftovers still go', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    expect((await lease.exec(['sh', '-c', `${detached(605)} echo service`], { keepProcesses: true })).exitCode).toBe(0);
    expect((await lease.exec(['sh', '-c', `${detached(606)} echo later`])).exitCode).toBe(0);
    const ps = await args(lease);
    expect(ps).toMatch(/sleep 605/);
    expect(ps).not.toMatch(/sleep 606/);
  }, 60_000);

  test('the setsid daemon of a running command survives another command ending beside it, and goes when its own command ends', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const long = lease.exec(['sh', '-c', `${detached(607)} sleep 4`]);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await lease.exec(['true'])).exitCode).toBe(0);
    expect(await args(lease)).toMatch(/sleep 607/);
    expect((await long).exitCode).toBe(0);
    expect(await args(lease)).not.toMatch(/sleep 607/);
  }, 60_000);
});

describe('kill records are out of a command\'s reach', () => {
  test('a command reads nothing that holds the kill nonce of another command running beside it', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    const other = lease.exec(['sh', '-c', 'sleep 3']);
    await new Promise((r) => setTimeout(r, 1000));
    // Every file it can find under /dev (the tmpfs mounts) and the command lines of every process.
    const snoop = 'for f in /dev/shm/.* /dev/shm/* /dev/shm/*/* /dev/berth*/* /dev/berth*/*/*; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done 2>/dev/null; for c in /proc/[0-9]*/cmdline; do tr "\\0" " " < $c; echo; done';
    const seen = await lease.exec(['sh', '-c', snoop]);
    await other;
    expect(seen.stdout).not.toMatch(/\b\d+ [0-9a-f]{16}\b/);
    expect(seen.stdout).not.toMatch(/\b[0-9a-f]{16}\b/);
  }, 60_000);

  test('a command that rewrites every kill record it can reach is still killed at its timeout, with nothing left', async ({ sandbox }) => {
    await using lease = await sandbox.host.lease(sandbox.spec(), { sessionId: 's' });
    // Points its own record at init (which no kill may hit), nonce kept, then sleeps on.
    const forge = 'for f in /dev/shm/.berth-exec.* /dev/berth*/*; do [ -f "$f" ] || continue; read -r p n < "$f" 2>/dev/null; echo "1 $n" > "$f" 2>/dev/null; done; sleep 60';
    const r = await lease.exec(['sh', '-c', forge], { timeoutMs: 1500 });
    expect(r.timedOut).toBe(true);
    expect(r.durationMs).toBeLessThan(15_000);
    expect(await args(lease)).not.toMatch(/sleep 60/);
  }, 90_000);
});
