import { describe, expect, it } from 'vitest';
import { openModeBlockedRanges } from '../../environment';
import { forwardingRules, hostResolvers, nameservers } from '../../host/sandbox/forward-rules';
import { dropReason } from '../../host/sandbox/sandbox-egress';
import { parseRuleTag, ruleTag } from '../../host/sandbox/sandbox-network';

// A host whose LAN is 10.1.0.0/16 (so all of 10/8 is closed to open sandboxes) and whose resolver is 10.255.255.53.
const IFACES = { eth0: [{ address: '10.1.2.3', netmask: '255.255.0.0', family: 'IPv4', internal: false, cidr: '10.1.2.3/16', mac: '', }] } as never;
const blocked = openModeBlockedRanges(IFACES);

/** Where a rule ends up in the chain after `-I` of each in order: the last inserted is first. */
const chainOrder = (rules: ReturnType<typeof forwardingRules>) => [...rules].reverse().map(([, r]) => r.join(' '));

describe('forwarding rules of a sandbox bridge', () => {
  it("open mode lets the host's resolvers through on port 53 above the DROP of the private range they lie in", () => {
    expect(blocked.map((r) => r.cidr)).toContain('10.0.0.0/8');
    const chain = chainOrder(forwardingRules('br-x', { mode: 'open', blocked, openings: [], resolvers: ['10.255.255.53'] }));
    const udp = chain.indexOf('-i br-x -d 10.255.255.53 -p udp --dport 53 -j RETURN');
    const tcp = chain.indexOf('-i br-x -d 10.255.255.53 -p tcp --dport 53 -j RETURN');
    const drop = chain.indexOf('-i br-x -d 10.0.0.0/8 -j DROP');
    expect(udp).toBeGreaterThanOrEqual(0);
    expect(tcp).toBeGreaterThanOrEqual(0);
    expect(Math.max(udp, tcp)).toBeLessThan(drop);
    // Only port 53 of the resolver: no rule lets anything else of it (or its range) through.
    expect(chain.filter((r) => r.includes('10.255.255.53'))).toHaveLength(2);
  });

  it('every refusal is logged first, and other Docker networks are refused in open mode unless a published port redirected the packet', () => {
    const chain = chainOrder(forwardingRules('br-x', { mode: 'open', blocked, openings: [], resolvers: [] }));
    for (const [i, r] of chain.entries()) if (r.endsWith('-j DROP')) expect(chain[i - 1], r).toBe(`${r.replace(/ -j DROP$/, '')} -m limit --limit 20/sec --limit-burst 40 -j LOG --log-prefix berth-drop `);
    expect(chain).toContain('-i br-x -o br-+ -m conntrack ! --ctstate DNAT -j DROP');
    expect(chain).toContain('-i br-x -o docker+ -m conntrack ! --ctstate DNAT -j DROP');
    expect(chain[0]).toBe('-i br-x -o br-x -j RETURN');
  });

  it('an allowlist bridge forwards nothing: logged, then refused at once as network unreachable', () => {
    expect(chainOrder(forwardingRules('br-x', { mode: 'allowlist' }))).toEqual([
      '-i br-x -m limit --limit 20/sec --limit-burst 40 -j LOG --log-prefix berth-drop ',
      '-i br-x -j REJECT --reject-with icmp-net-unreachable',
    ]);
  });
});

describe("the host's resolvers", () => {
  it('are the IPv4 nameservers of /etc/resolv.conf, loopback ones left out', () => {
    expect(nameservers('# c\nnameserver 10.255.255.53\nnameserver fd00::53\n nameserver 1.1.1.1\nsearch x\n')).toEqual(['10.255.255.53', '1.1.1.1']);
    expect(hostResolvers((p) => (p === '/etc/resolv.conf' ? 'nameserver 127.0.0.11\nnameserver 192.168.1.1\n' : ''))).toEqual(['192.168.1.1']);
  });

  it("are systemd-resolved's upstreams when /etc/resolv.conf names only its stub, as Docker does", () => {
    const files: Record<string, string> = { '/etc/resolv.conf': 'nameserver 127.0.0.53\n', '/run/systemd/resolve/resolv.conf': 'nameserver 172.31.0.2\n' };
    expect(hostResolvers((p) => files[p] ?? '')).toEqual(['172.31.0.2']);
    expect(hostResolvers(() => { throw new Error('ENOENT'); })).toEqual([]);
  });
});

describe('why a dropped packet was dropped', () => {
  it('names the mode, the Docker network or the blocked range', () => {
    expect(dropReason({ proto: 'TCP', dst: '169.254.169.254', out: 'eth0' }, 'allowlist', blocked)).toMatch(/out of the allowlist sandbox refused/);
    expect(dropReason({ proto: 'TCP', dst: '172.18.0.2', out: 'br-0123456789ab' }, 'open', blocked)).toMatch(/another Docker network \(br-0123456789ab\)/);
    expect(dropReason({ proto: 'UDP', dst: '10.9.9.9', out: 'eth0' }, 'open', blocked)).toMatch(/10\.0\.0\.0\/8/);
  });
});

describe("a firewall rule's tag", () => {
  it('names the host and lease it was put in for (berth gc --orphans attributes it by them), a held bridge\'s too, whatever colons the host id has', () => {
    expect(parseRuleTag(ruleTag('vm', 'lease_01'))).toEqual({ hostId: 'vm', leaseId: 'lease_01', hold: false });
    expect(parseRuleTag(`${ruleTag('ci:runner:3', 'lease_02')}:hold`)).toEqual({ hostId: 'ci:runner:3', leaseId: 'lease_02', hold: true });
    for (const other of ['berth:', 'berth:vm', 'docker:vm:lease_01']) expect(parseRuleTag(other)).toBeUndefined();
  });
});
