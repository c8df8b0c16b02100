import { execFileSync } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { createServer, get, type Server } from 'node:http';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import type Dockerode from 'dockerode';
import { egressPort } from '../../host/egress';
import { createSandboxHost, type Lease, type SandboxNetworkSpec } from '../../host/sandbox';
import { listRuleTags, ruleTag } from '../../host/sandbox/sandbox-network';
import { openModeBlockedRanges } from '../../environment';
import { systemClock } from '../../host/support/clock';
import { bridgeGateway } from '../support/docker-engine';
import { describe, expect, test } from '../support/sandbox-fixture';

/** A name the host resolves (apt needs it on every machine that runs these tests). */
const OUTSIDE_NAME = 'deb.debian.org';

function serve(text: string): Promise<{ server: Server; port: number }> {
  // `::` takes IPv4 and IPv6 on every address of the host: the widest a careless host service binds.
  const server = createServer((req, res) => res.end(`${text} ${req.url}`));
  return new Promise((r) => server.listen(0, '::', () => r({ server, port: (server.address() as { port: number }).port })));
}

function fetchFromHost(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

/** The host's own addresses a sandbox could aim at, besides its gateway: interfaces that are not loopback and not Docker's. */
function hostAddresses(): { v4: string[]; v6: string[] } {
  const v4 = new Set<string>();
  const v6 = new Set<string>();
  for (const [name, list] of Object.entries(networkInterfaces())) {
    if (name.startsWith('br-') || name.startsWith('veth')) continue;
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv4') v4.add(a.address);
      else if (!a.address.startsWith('fe80')) v6.add(a.address);
    }
  }
  const docker0 = bridgeGateway();
  if (docker0) v4.add(docker0);
  return { v4: [...v4], v6: [...v6] };
}

const sh = async (lease: Lease, cmd: string, o: { keepProcesses?: boolean } = {}) => {
  const r = await lease.exec(['sh', '-c', cmd], { timeoutMs: 30_000, ...o });
  return { code: r.exitCode, out: r.stdout + r.stderr };
};
const direct = (url: string) => `env -u http_proxy -u HTTP_PROXY timeout 5 busybox wget -q -O - ${url}`;
const ipOf = (lease: Lease, docker: import('dockerode')) =>
  docker.getContainer(lease.containerId).inspect().then((i) => Object.values(i.NetworkSettings.Networks)[0]!.IPAddress);

describe('no way out of a sandbox but the ones its manifest names', { timeout: 180_000 }, () => {
  test('an allowlist sandbox reaches no host address, no other sandbox, no IPv6 and no DNS; an open one reaches only the host port it lists', async ({ sandbox, onTestFinished }) => {
    const service = await serve('host-service');
    const other = await serve('other-service');
    onTestFinished(() => new Promise((r) => service.server.close(() => other.server.close(() => r()))));
    const addrs = hostAddresses();
    expect(addrs.v4.length, 'the host has an address besides loopback and the sandbox gateways').toBeGreaterThan(0);
    const listed = addrs.v4.find((a) => a !== bridgeGateway()) ?? addrs.v4[0]!;
    // Each target answers the host itself, so a failure from the sandbox is the rules, not a dead service.
    for (const a of addrs.v4) expect(await fetchFromHost(`http://${a}:${service.port}/x`)).toBe('host-service /x');
    for (const a of addrs.v6) expect(await fetchFromHost(`http://[${a}]:${service.port}/x`)).toBe('host-service /x');
    expect((await lookup(OUTSIDE_NAME)).address, `the host resolves ${OUTSIDE_NAME}`).toBeTruthy();

    const host = createSandboxHost({ docker: sandbox.docker, records: sandbox.store, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId, egress: egressPort(sandbox.store, sandbox.logger) });
    onTestFinished(() => host.close());
    const spec = (network: SandboxNetworkSpec) => ({ ...sandbox.spec(), network });
    await using walled = await host.lease(spec({ mode: 'allowlist', allow: [`localhost:${service.port}`], overrides: [`localhost:${service.port}`] }), { sessionId: 'sess_walled' });
    await using open = await host.lease(spec({ mode: 'open', hostOpenings: [{ address: listed, port: service.port }] }), { sessionId: 'sess_open' });
    const [walledIp, openIp] = await Promise.all([ipOf(walled, sandbox.docker), ipOf(open, sandbox.docker)]);
    for (const l of [walled, open]) await sh(l, 'mkdir -p /tmp/www && echo sandbox-page > /tmp/www/index.html && (busybox httpd -p 8080 -h /tmp/www &)', { keepProcesses: true });
    expect((await sh(open, 'timeout 5 busybox wget -q -O - http://127.0.0.1:8080/')).out, 'the other sandbox serves').toBe('sandbox-page\n');

    // Allowlist: the listed target through the proxy, nothing directly.
    expect(await sh(walled, `timeout 5 busybox wget -q -O - http://localhost:${service.port}/ok`)).toEqual({ code: 0, out: 'host-service /ok' });
    const gateway = (await sh(walled, 'echo "$http_proxy" | sed "s|http://||; s|:.*||"')).out.trim();
    const openGateway = (await sh(open, "ip route | awk '/^default/ {print $3}'")).out.trim();
    // Every attempt that must fail, run side by side: a dropped packet costs a whole timeout each.
    const refused: Array<[string, Lease, string]> = [
      ...[gateway, ...addrs.v4].map((a): [string, Lease, string] => [`allowlist: direct TCP to host address ${a}`, walled, direct(`http://${a}:${service.port}/`)]),
      ['allowlist: direct TCP to another sandbox', walled, direct(`http://${openIp}:8080/`)],
      ...addrs.v6.map((a): [string, Lease, string] => [`allowlist: IPv6 to host address ${a}`, walled, `timeout 5 busybox nc -w 3 ${a} ${service.port} </dev/null`]),
      [`allowlist: DNS lookup of ${OUTSIDE_NAME}`, walled, `timeout 10 nslookup ${OUTSIDE_NAME}`],
      ['open: another port of the listed address', open, direct(`http://${listed}:${other.port}/`)],
      ...addrs.v4.filter((x) => x !== listed).map((a): [string, Lease, string] => [`open: host address ${a}`, open, direct(`http://${a}:${service.port}/`)]),
      ['open: its network gateway', open, direct(`http://${openGateway}:${service.port}/`)],
      ['open: the allowlist sandbox', open, direct(`http://${walledIp}:8080/`)],
      ...addrs.v6.map((a): [string, Lease, string] => [`open: IPv6 to host address ${a}`, open, `timeout 5 busybox nc -w 3 ${a} ${service.port} </dev/null`]),
    ];
    const outcomes = await Promise.all(refused.map(async ([what, l, cmd]) => ({ what, ...(await sh(l, cmd)) })));
    for (const o of outcomes) {
      expect(o.code, `${o.what}: ${o.out}`).not.toBe(0);
      expect(o.out, o.what).not.toMatch(/host-service|other-service|sandbox-page|Address:?\s+\d+\.\d+\.\d+\.\d+\s*$/m);
    }
    const viaProxy = await sh(walled, `timeout 5 busybox wget -q -O - http://${openIp}:8080/ 2>&1`);
    expect(viaProxy.out, 'another sandbox through the proxy: an unlisted IP literal').toMatch(/403/);
    for (const l of [walled, open]) expect((await sh(l, 'cat /proc/sys/net/ipv6/conf/all/disable_ipv6')).out.trim(), 'no IPv6 in the sandbox').toBe('1');

    // Open: a route out and DNS, and the host on the listed address and port.
    expect(openGateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect((await sh(open, `timeout 10 nslookup ${OUTSIDE_NAME}`)).code, 'open mode resolves outside names').toBe(0);
    expect(await sh(open, direct(`http://${listed}:${service.port}/listed`))).toEqual({ code: 0, out: 'host-service /listed' });

    // Both bridges carry IPv4 and IPv6 rules, tagged per lease so release removes exactly them.
    const tags = await listRuleTags();
    for (const l of [walled, open]) expect(tags).toContain(ruleTag(sandbox.hostId, l.id));
    expect(execFileSync('ip6tables', ['-w', '-S', 'INPUT'], { encoding: 'utf8' })).toContain(ruleTag(sandbox.hostId, walled.id));
    await walled.release();
    await open.release();
    const after = await listRuleTags();
    for (const l of [walled, open]) expect(after).not.toContain(ruleTag(sandbox.hostId, l.id));
    expect(await sandbox.docker.listNetworks({ filters: { label: [`berth.host=${sandbox.hostId}`] } })).toEqual([]);
  });

  test("a container on another network, another lease's sandbox and the host itself cannot use a lease's proxy; each attempt is refused and audited", async ({ sandbox, onTestFinished }) => {
    const service = await serve('host-service');
    onTestFinished(() => new Promise((r) => service.server.close(() => r())));
    const host = createSandboxHost({ docker: sandbox.docker, records: sandbox.store, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId, egress: egressPort(sandbox.store, sandbox.logger) });
    onTestFinished(() => host.close());
    const allow = [`localhost:${service.port}`];
    const spec = { ...sandbox.spec(), network: { mode: 'allowlist' as const, allow, overrides: allow } };
    await using walled = await host.lease(spec, { sessionId: 'sess_walled' });
    await using neighbour = await host.lease(spec, { sessionId: 'sess_neighbour' });
    const proxyUrl = (await sh(walled, 'echo "$http_proxy"')).out.trim();
    const [gateway, port] = proxyUrl.replace('http://', '').split(':') as [string, string];
    // Its own container uses it.
    expect(await sh(walled, `timeout 10 busybox wget -q -O - http://localhost:${service.port}/own`)).toEqual({ code: 0, out: 'host-service /own' });

    // A container that is not Berth's, on a network the test creates (labelled so only this test removes it).
    const label = { 'berth.test': sandbox.hostId };
    const net = await sandbox.docker.createNetwork({ Name: `berth-test-${sandbox.hostId}`, Driver: 'bridge', Labels: label });
    onTestFinished(() => net.remove().catch(() => undefined));
    const stranger = await sandbox.docker.createContainer({ Image: sandbox.imageId, Cmd: ['sh', '-c', 'while :; do sleep 1000; done'], Labels: label, HostConfig: { NetworkMode: `berth-test-${sandbox.hostId}`, Init: true } });
    onTestFinished(() => stranger.remove({ force: true }).catch(() => undefined));
    await stranger.start();
    const strangerIp = (await stranger.inspect()).NetworkSettings.Networks[`berth-test-${sandbox.hostId}`]!.IPAddress;
    const viaStolenProxy = `http_proxy=${proxyUrl} timeout 10 busybox wget -q -O - http://localhost:${service.port}/stolen 2>&1; echo "exit=$?"`;
    const fromStranger = await execIn(stranger, viaStolenProxy);
    expect(fromStranger, 'a foreign container through the proxy').not.toContain('host-service');
    expect(fromStranger).toMatch(/exit=[1-9]/);
    const fromNeighbour = await sh(neighbour, viaStolenProxy);
    expect(fromNeighbour.out, "another lease's sandbox through this lease's proxy").not.toContain('host-service');
    // The host itself (lo): refused at once, not left to time out.
    const fromHost = await new Promise<string>((resolve) => {
      const s = connect(Number(port), gateway);
      s.on('connect', () => (s.destroy(), resolve('connected')));
      s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    });
    expect(fromHost).toBe('ECONNREFUSED');
    const neighbourIp = await ipOf(neighbour, sandbox.docker);

    // Every refused connection is audited with where it came from: on the targeted lease, or (the
    // neighbour, whose own rules may drop the packet first, depending on rule order) on the lease it came from.
    await walled.release();
    await neighbour.release();
    const refused = (await sandbox.store.listEgress({ leaseId: walled.id })).filter((a) => a.decision === 'deny');
    const sources = refused.map((a) => /from (\S+)/.exec(a.reason)?.[1]);
    for (const from of [strangerIp, gateway]) expect(sources, `refused attempt from ${from} audited: ${JSON.stringify(refused)}`).toContain(from);
    for (const a of refused) expect(a).toMatchObject({ method: 'TCP', target: `${gateway}:${port}`, reason: expect.stringContaining('refused: only this sandbox') });
    const byNeighbour = [...refused.filter((a) => a.reason.includes(`from ${neighbourIp} `)), ...(await sandbox.store.listEgress({ leaseId: neighbour.id })).filter((a) => a.target === `${gateway}:${port}`)];
    expect(byNeighbour, "the neighbour's attempt on the proxy").toEqual([expect.objectContaining({ method: 'TCP', decision: 'deny', count: 1 })]);
    expect((await sandbox.store.listEgress({ leaseId: walled.id })).filter((a) => a.decision === 'allow').map((a) => a.target)).toEqual([`localhost:${service.port}`]);
  });

  test('an open sandbox cannot reach the link-local range (169.254.169.254) or the LAN of this machine: the rules are there and the attempt is dropped and recorded', async ({ sandbox, onTestFinished }) => {
    // The interfaces are read once and pinned: a test beside this one may start or stop a second
    // engine, whose bridge is a LAN of this machine while it exists (CI saw one appear mid-lease).
    const interfaces = networkInterfaces();
    const host = createSandboxHost({ docker: sandbox.docker, records: sandbox.store, clock: systemClock, logger: sandbox.logger, hostId: sandbox.hostId, egress: egressPort(sandbox.store, sandbox.logger), interfaces: () => interfaces });
    onTestFinished(() => host.close());
    // One listed address in a blocked range (never connected to here): it gets a RETURN above the DROPs.
    await using open = await host.lease({ ...sandbox.spec(), network: { mode: 'open', hostOpenings: [{ address: '169.254.170.2', port: 80 }] } }, { sessionId: 'sess_open' });
    const blocked = openModeBlockedRanges(interfaces);
    expect(blocked.map((r) => r.cidr)).toContain('169.254.0.0/16');
    // Each blocked range has a DROP for this sandbox's bridge, tagged with its lease.
    const forward = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(ruleTag(sandbox.hostId, open.id)) && l.includes('-j DROP') && / -d \d/.test(l));
    expect(forward.map((l) => / -d (\S+)/.exec(l)![1]).sort()).toEqual(blocked.map((r) => r.cidr).sort());
    const chain = execFileSync('iptables', ['-w', '-S', 'DOCKER-USER'], { encoding: 'utf8' }).split('\n');
    const listed = chain.findIndex((l) => l.includes(ruleTag(sandbox.hostId, open.id)) && l.includes('-d 169.254.170.2/32') && l.includes('--dport 80') && l.includes('-j RETURN'));
    const linkLocalDrop = chain.findIndex((l) => l.includes(ruleTag(sandbox.hostId, open.id)) && l.includes('-d 169.254.0.0/16') && l.includes('-j DROP'));
    expect(listed, 'the listed address is let through').toBeGreaterThanOrEqual(0);
    expect(listed, 'above the DROP of its range').toBeLessThan(linkLocalDrop);
    // The metadata address: no answer (the sandbox's rules drop it before it leaves the host).
    const metadata = await sh(open, 'if timeout 5 busybox nc -w 3 169.254.169.254 80 </dev/null 2>/dev/null; then echo reached; else echo blocked; fi');
    expect(metadata.out).toBe('blocked\n');
    await open.release();
    const dropped = (await sandbox.store.listEgress({ leaseId: open.id })).filter((a) => a.target === '169.254.169.254:80');
    expect(dropped, 'the attempt is recorded as dropped by the open-mode rules').toEqual([expect.objectContaining({ method: 'TCP', decision: 'deny', count: 1, reason: expect.stringContaining('169.254.0.0/16') })]);
    expect(execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })).not.toContain(ruleTag(sandbox.hostId, open.id));
  });
});

/** Runs `cmd` in a plain container (not a lease) and returns its output. */
async function execIn(c: Dockerode.Container, cmd: string): Promise<string> {
  const exec = await c.exec({ Cmd: ['sh', '-c', cmd], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  stream.on('data', (d: Buffer) => chunks.push(d));
  await new Promise((r) => stream.on('end', r));
  const all = Buffer.concat(chunks);
  let out = '';
  for (let i = 0; i + 8 <= all.length; i += 8 + all.readUInt32BE(i + 4)) out += all.subarray(i + 8, i + 8 + all.readUInt32BE(i + 4)).toString('utf8');
  return out;
}
