import { readFileSync } from 'node:fs';
import { egressPort } from '../../host/egress';
import { createSandboxHost, type Lease } from '../../host/sandbox';
import { systemClock } from '../../host/support/clock';
import { openModeBlockedRanges, privateRangeOf } from '../../environment';
import { describe, expect, test, type SandboxWorld } from '../support/sandbox-fixture';

const sh = async (lease: Lease, cmd: string) => {
  const r = await lease.exec(['sh', '-c', cmd], { timeoutMs: 60_000 });
  return { code: r.exitCode, out: r.stdout + r.stderr };
};
/** A direct TCP connect, bypassing the proxy; prints how it ended and how long it took (in whole seconds). */
const connect = (address: string, port: number) =>
  `s=$(date +%s); if env -u http_proxy -u HTTP_PROXY timeout 8 busybox nc -w 6 ${address} ${port} </dev/null >/dev/null 2>&1; then r=reached; else r=failed; fi; echo "$r $(( $(date +%s) - s ))"`;

/** An address in a documentation range (TEST-NET-3): never routed, so nothing can answer it anywhere. */
const OUTSIDE = '203.0.113.7';
const OUTSIDE_NAME = 'deb.debian.org';

/**
 * A neighbour (a plain container serving HTTP on a network this test creates, labelled so only the
 * test removes it) and a sandbox host with the egress port, both removed when the test ends.
 */
async function neighbourAndHost(sandbox: SandboxWorld, onTestFinished: (fn: () => Promise<void> | void) => void) {
  const label = { 'berth.test': sandbox.hostId };
  const netName = `berth-test-${sandbox.hostId}`;
  const net = await sandbox.docker.createNetwork({ Name: netName, Driver: 'bridge', Labels: label });
  onTestFinished(() => net.remove().catch(() => undefined));
  const neighbour = await sandbox.docker.createContainer({ Image: sandbox.imageId, Cmd: ['sh', '-c', 'mkdir -p /tmp/w && echo neighbour-page > /tmp/w/index.html && exec busybox httpd -f -p 8080 -h /tmp/w'], Labels: label, HostConfig: { NetworkMode: netName, Init: true } });
  onTestFinished(() => neighbour.remove({ force: true }).catch(() => undefined));
  await neighbour.start();
  const neighbourIp = (await neighbour.inspect()).NetworkSettings.Networks[netName]!.IPAddress;
  const host = createSandboxHost({ docker: sandbox.docker, records: sandbox.store, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId, egress: egressPort(sandbox.store, sandbox.logger) });
  onTestFinished(() => host.close());
  return { neighbourIp, host };
}

describe('every direct attempt out of a sandbox is refused and audited', { timeout: 240_000 }, () => {
  test('from an allowlist sandbox, direct connects to 169.254.169.254:80, an outside address and a neighbour container on another network fail at once and each is in the audit', async ({ sandbox, onTestFinished }) => {
    const { neighbourIp, host } = await neighbourAndHost(sandbox, onTestFinished);
    await using walled = await host.lease({ ...sandbox.spec(), network: { mode: 'allowlist', allow: ['example.invalid:80'], overrides: [] } }, { sessionId: 'sess_walled' });
    const targets: Array<[string, string, number]> = [
      ['the metadata address', '169.254.169.254', 80],
      ['an outside address', OUTSIDE, 80],
      ['a neighbour container', neighbourIp, 8080],
    ];
    const outcomes = await Promise.all(targets.map(async ([what, a, p]) => ({ what, a, p, ...(await sh(walled, connect(a, p))) })));
    for (const o of outcomes) {
      const [result, seconds] = o.out.trim().split(' ');
      expect(result, `${o.what} (${o.a}:${o.p}): ${o.out}`).toBe('failed');
      // Refused where it left the container, not left to time out somewhere beyond.
      expect(Number(seconds), `${o.what} failed at once, not after a timeout`).toBeLessThan(4);
    }
    await walled.release();
    const denied = (await sandbox.store.listEgress({ leaseId: walled.id })).filter((a) => a.decision === 'deny');
    for (const [what, a, p] of targets) {
      expect(denied.filter((d) => d.target === `${a}:${p}`), `${what} audited: ${JSON.stringify(denied)}`).toEqual([expect.objectContaining({ method: 'TCP', count: 1, reason: expect.stringContaining('direct TCP') })]);
    }
  });

  test("open mode resolves outside names through the host's resolver also when a host bridge lies in the resolver's private range", async ({ sandbox, onTestFinished }) => {
    const resolver = /^nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/m.exec(readFileSync('/etc/resolv.conf', 'utf8'))?.[1];
    expect(resolver, 'this machine has an IPv4 resolver in /etc/resolv.conf').toBeTruthy();
    const range = privateRangeOf(resolver!)?.split(' ')[0];
    // A bridge of this host that is not one of Docker's sandbox bridges (its own name), in the resolver's
    // private range but not holding the resolver itself (that would take the host's own route to it).
    // On a machine whose resolver is public, the bridge goes in 10/8 and the check is that nothing blocks it.
    const first = Number((range ?? '10.0.0.0/8').split('.')[0]);
    const second = Number((range ?? '10.0.0.0/8').split('.')[1]);
    // 10/8: 10.213.7.0/24; 172.16/12 and 192.168/16: a /24 in the range's first /16.
    const subnet = first === 10 ? `10.${resolver!.startsWith('10.213.') ? 214 : 213}.7.0/24` : `${first}.${second}.${resolver!.startsWith(`${first}.${second}.213.`) ? 214 : 213}.0/24`;
    expect(subnet.startsWith(resolver!.split('.').slice(0, 3).join('.')), 'the test bridge does not hold the resolver').toBe(false);
    const label = { 'berth.test': sandbox.hostId };
    const bridge = `berthdns${sandbox.hostId.slice(-6).replace(/[^a-z0-9]/gi, '')}`.slice(0, 15);
    const net = await sandbox.docker.createNetwork({ Name: `berth-test-${sandbox.hostId}`, Driver: 'bridge', Labels: label, Options: { 'com.docker.network.bridge.name': bridge }, IPAM: { Config: [{ Subnet: subnet }] } });
    onTestFinished(() => net.remove().catch(() => undefined));
    // A bridge is up (and listed among the host's interfaces) only while something is attached to it.
    const member = await sandbox.docker.createContainer({ Image: sandbox.imageId, Cmd: ['sh', '-c', 'while :; do sleep 1000; done'], Labels: label, HostConfig: { NetworkMode: `berth-test-${sandbox.hostId}`, Init: true } });
    onTestFinished(() => member.remove({ force: true }).catch(() => undefined));
    await member.start();
    const blocked = openModeBlockedRanges().map((r) => r.cidr);
    expect(blocked, `${bridge} counts as a host network`).toContain(subnet);

    // The host process starts after the bridge exists: its open-mode ranges include the bridge's private range.
    const host = createSandboxHost({ docker: sandbox.docker, records: sandbox.store, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId, egress: egressPort(sandbox.store, sandbox.logger) });
    onTestFinished(() => host.close());
    await using open = await host.lease({ ...sandbox.spec(), network: { mode: 'open', hostOpenings: [] } }, { sessionId: 'sess_open' });
    const lookup = await sh(open, `timeout 20 nslookup ${OUTSIDE_NAME}`);
    expect(lookup.code, `nslookup in open mode with ${bridge} (${subnet}) up, resolver ${resolver}: ${lookup.out}`).toBe(0);
    // The bridge's range stays closed apart from the resolver's port 53, and DNS is no refused attempt.
    const memberIp = (await member.inspect()).NetworkSettings.Networks[`berth-test-${sandbox.hostId}`]!.IPAddress;
    expect((await sh(open, connect(memberIp, 80))).out).toMatch(/^failed/);
    await open.release();
    const denied = (await sandbox.store.listEgress({ leaseId: open.id })).filter((a) => a.decision === 'deny');
    expect(denied.filter((d) => d.target === `${memberIp}:80`), JSON.stringify(denied)).toEqual([expect.objectContaining({ method: 'TCP', reason: expect.stringContaining('dropped: open mode does not reach it') })]);
    expect(denied.filter((d) => d.target.endsWith(':53')), 'no DNS query was dropped').toEqual([]);
  });

  test('from an open sandbox, a direct connect to a container on another Docker network is dropped and audited', async ({ sandbox, onTestFinished }) => {
    const { neighbourIp, host } = await neighbourAndHost(sandbox, onTestFinished);
    await using open = await host.lease({ ...sandbox.spec(), network: { mode: 'open', hostOpenings: [] } }, { sessionId: 'sess_open' });
    expect((await sh(open, connect(neighbourIp, 8080))).out).toMatch(/^failed/);
    await open.release();
    const denied = (await sandbox.store.listEgress({ leaseId: open.id })).filter((a) => a.decision === 'deny' && a.target === `${neighbourIp}:8080`);
    expect(denied, 'the attempt on the neighbour is audited').toEqual([expect.objectContaining({ method: 'TCP', count: 1, reason: expect.stringContaining('another Docker network') })]);
  });
});
