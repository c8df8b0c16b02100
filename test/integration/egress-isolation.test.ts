import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { afterEach, describe, expect, it } from 'vitest';
import { EgressProxy } from '../../host/egress';
import { createSandboxNetwork, EGRESS_PROXY_PORT, isolateBridge, listRuleTags, removeBridgeRules, removeSandboxNetwork, ruleTag, sweepEgress, type SandboxNetwork } from '../../host/sandbox/sandbox-network';
import { openSqliteStore } from '../../host/store';
import { requireEngine, requireTinyImage } from '../support/docker-engine';

const hostId = `test-egress-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

function serve(host: string, text: string): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => res.end(`${text} ${req.url}`));
  cleanups.push(() => new Promise((r) => server.close(r)));
  return new Promise((r) => server.listen(0, host, () => r({ server, port: (server.address() as { port: number }).port })));
}

async function sandboxOn(docker: Dockerode, image: string, net: SandboxNetwork): Promise<(cmd: string) => Promise<{ code: number; out: string }>> {
  const proxy = `http://${net.gateway}:${EGRESS_PROXY_PORT}`;
  const c = await docker.createContainer({
    Image: image,
    Cmd: ['sh', '-c', 'while :; do sleep 1000; done'],
    User: '1000:1000',
    Env: [`http_proxy=${proxy}`, `HTTP_PROXY=${proxy}`, `https_proxy=${proxy}`, `HTTPS_PROXY=${proxy}`],
    Labels: { 'berth.host': hostId },
    HostConfig: { NetworkMode: net.name, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], Init: true },
  });
  cleanups.push(() => c.remove({ force: true }));
  await c.start();
  return async (cmd) => {
    const exec = await c.exec({ Cmd: ['sh', '-c', cmd], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    const chunks: Buffer[] = [];
    stream.on('data', (d: Buffer) => chunks.push(d));
    await new Promise((r) => stream.on('end', r));
    // Demultiplex the engine's 8-byte frame headers.
    const all = Buffer.concat(chunks);
    let out = '';
    for (let i = 0; i + 8 <= all.length; ) {
      const len = all.readUInt32BE(i + 4);
      out += all.subarray(i + 8, i + 8 + len).toString('utf8');
      i += 8 + len;
    }
    return { code: (await exec.inspect()).ExitCode ?? -1, out };
  };
}

describe('egress from an internal sandbox network', { timeout: 120_000 }, () => {
  it('reaches an allowed target only through the proxy; everything else on the host is closed and audited', async () => {
    const docker = await requireEngine();
    const image = await requireTinyImage(docker);
    const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'berth-egress-')), 'b.db'));
    cleanups.push(() => store.close());
    const leaseId = `lease_${Math.random().toString(36).slice(2, 10)}`;
    const net = await createSandboxNetwork(docker, { hostId, leaseId });
    cleanups.push(() => removeSandboxNetwork(docker, net.id));
    const tag = ruleTag(hostId, leaseId);
    cleanups.push(() => removeBridgeRules((t) => t === tag));

    const target = await serve('127.0.0.1', 'hello');
    // A host service on the gateway address: exactly what an internal network still reaches.
    const hostService = await serve(net.gateway, 'host-service');
    const proxy = new EgressProxy({
      allow: [`allowed.test:${target.port}`],
      overrides: [`allowed.test:${target.port}`],
      runId: 'run_e',
      leaseId,
      record: (a) => void store.recordEgress(a),
      resolve: async (h) => (h === 'allowed.test' ? '127.0.0.1' : Promise.reject(new Error('nxdomain'))),
    });
    await proxy.listen(net.gateway, EGRESS_PROXY_PORT);
    cleanups.push(() => proxy.close());
    const sh = await sandboxOn(docker, image, net);

    // busybox wget -T crashes in this image, hence `timeout`.
    const direct = `env -u http_proxy -u HTTP_PROXY timeout 5 busybox wget -q -O - http://${net.gateway}:${hostService.port}/x`;
    expect((await sh(direct)).out, 'without INPUT rules the host service answers').toContain('host-service /x');
    await isolateBridge(net.bridge, [{ address: net.gateway, port: EGRESS_PROXY_PORT }], tag);
    expect(await listRuleTags()).toContain(tag);

    const ok = await sh(`timeout 5 busybox wget -q -O - http://allowed.test:${target.port}/ok`);
    expect(ok).toEqual({ code: 0, out: 'hello /ok' });
    const denied = await sh(`timeout 5 busybox wget -q -O - http://denied.test:${target.port}/`);
    expect(denied.code).not.toBe(0);
    expect(denied.out).toMatch(/403/);
    const blocked = await sh(direct);
    expect(blocked.code, 'direct TCP to another gateway port is dropped').not.toBe(0);
    expect(blocked.out).not.toContain('host-service');
    const mismatch = await sh(`printf 'CONNECT allowed.test:${target.port} HTTP/1.1\\r\\nHost: evil.test:${target.port}\\r\\n\\r\\n' | busybox nc -w 3 ${net.gateway} ${EGRESS_PROXY_PORT}`);
    expect(mismatch.out).toMatch(/^HTTP\/1\.1 403/);
    const absolute = await sh(`printf 'CONNECT http://evil.test:443/ HTTP/1.1\\r\\nHost: evil.test:443\\r\\n\\r\\n' | busybox nc -w 3 ${net.gateway} ${EGRESS_PROXY_PORT}`);
    expect(absolute.out).toMatch(/^HTTP\/1\.1 400/);

    await new Promise((r) => setTimeout(r, 200));
    const audit = await store.listEgress({ leaseId });
    expect(audit.map((a) => [a.method, a.target, a.decision])).toEqual([
      ['GET', `allowed.test:${target.port}`, 'allow'],
      ['GET', `denied.test:${target.port}`, 'deny'],
      ['CONNECT', `allowed.test:${target.port}`, 'deny'],
      ['CONNECT', 'http://evil.test:443/', 'deny'],
    ]);
    expect(audit[0]!).toMatchObject({ runId: 'run_e', bytesIn: expect.any(Number) });
    expect(audit[0]!.bytesIn).toBeGreaterThan(0);

    expect(await removeBridgeRules((t) => t === tag)).toBe(5);
    expect(await listRuleTags()).not.toContain(tag);
  });

  it('the egress sweep removes the network and INPUT rules of a lease that is no longer active', async () => {
    const docker = await requireEngine();
    const leaseId = `lease_${Math.random().toString(36).slice(2, 10)}`;
    const net = await createSandboxNetwork(docker, { hostId, leaseId });
    cleanups.push(() => removeSandboxNetwork(docker, net.id));
    const tag = ruleTag(hostId, leaseId);
    cleanups.push(() => removeBridgeRules((t) => t === tag));
    await isolateBridge(net.bridge, [{ address: net.gateway, port: EGRESS_PROXY_PORT }], tag);

    // The sweep asks about the leases its network and rules name, and only those.
    const asked: string[][] = [];
    const view = (active: boolean) => async (ids: string[]) => (asked.push(ids), { isActive: (id: string) => active && id === leaseId, isKnown: () => false });
    const active = await sweepEgress(docker, hostId, view(true), 0);
    expect(asked).toEqual([[leaseId]]);
    expect(active).toMatchObject({ networks: 0, rules: 0, keptNetworks: [{ leaseId, why: 'its lease is active' }] });
    // A network this young may belong to a lease whose record is not written yet: kept by default, and said so.
    const young = await sweepEgress(docker, hostId, view(false));
    expect(young).toMatchObject({ networks: 0, rules: 0, removedNetworks: [], removedRules: [] });
    expect(young.keptNetworks.map((n) => n.why)).toEqual([expect.stringContaining('no lease record names it yet')]);
    const swept = await sweepEgress(docker, hostId, view(false), 0);
    expect(swept).toMatchObject({ networks: 1, rules: 5, removedNetworks: [{ id: net.id, leaseId }], keptNetworks: [] });
    expect(swept.removedRules).toHaveLength(5);
    expect(swept.removedRules.every((r) => r.endsWith(tag))).toBe(true);
    expect(await listRuleTags()).not.toContain(tag);
    expect(await docker.listNetworks({ filters: { label: [`berth.host=${hostId}`] } })).toEqual([]);
  });

  it('removes every rule of a stale listing: one another process deleted meanwhile counts as done, and the rest still go', async () => {
    // No network needed: rules on an interface that does not exist are inert.
    const bridge = `br-${Math.random().toString(16).slice(2, 14).padEnd(12, '0')}`;
    const tag = ruleTag(hostId, `lease_${Math.random().toString(36).slice(2, 10)}`);
    cleanups.push(() => removeBridgeRules((t) => t === tag));
    await isolateBridge(bridge, [], tag);
    const tools = ['iptables', 'ip6tables'] as const;
    const listing = tools.map((tool): [(typeof tools)[number], string[]] => [tool, execFileSync(tool, ['-w', '-S'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(tag))]);
    expect(listing.flatMap(([, lines]) => lines)).toHaveLength(4);
    // Another gc (or the lease's own release) deletes its IPv4 DROP between the listing and the removal.
    execFileSync('iptables', ['-w', '-D', 'INPUT', '-i', bridge, '-j', 'DROP', '-m', 'comment', '--comment', tag]);
    const removed: string[] = [];
    expect(await removeBridgeRules((t) => t === tag, (r) => removed.push(r), listing)).toBe(4);
    expect(removed).toHaveLength(4);
    expect(await listRuleTags()).not.toContain(tag);
  });
});
