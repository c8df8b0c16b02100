import { describe, expect, it } from 'vitest';
import { allowedHosts, hostAllowed } from '../../host/support/host-header';

const ifaces = {
  lo: [{ address: '127.0.0.1', family: 'IPv4' }, { address: '::1', family: 'IPv6' }],
  eth0: [{ address: '10.1.2.3', family: 'IPv4' }, { address: 'fe80::1%eth0', family: 'IPv6' }],
} as unknown as ReturnType<typeof import('node:os').networkInterfaces>;

describe('the Host values berth serve answers', () => {
  it('a loopback bind answers its address and the loopback names, each with its port only', () => {
    expect([...allowedHosts('127.0.0.1', 7777, ifaces)].sort()).toEqual(['127.0.0.1:7777', '[::1]:7777', 'localhost:7777']);
    expect(allowedHosts('::1', 7777, ifaces).has('[::1]:7777')).toBe(true);
  });

  it('a wildcard bind answers every interface address of the machine, never a name', () => {
    const hosts = allowedHosts('0.0.0.0', 8080, ifaces);
    expect(hosts.has('10.1.2.3:8080')).toBe(true);
    expect(hosts.has('[fe80::1]:8080')).toBe(true);
    expect(hosts.has('0.0.0.0:8080')).toBe(true);
    expect(hosts.has('10.1.2.3')).toBe(false);
    expect([...hosts].some((h) => /[a-z]{4,}\.[a-z]/.test(h))).toBe(false);
  });

  it('a name given as --host is answered, in lower case; on port 80 also without the port', () => {
    const hosts = allowedHosts('Berth.Internal', 80, ifaces);
    expect(hosts.has('berth.internal:80')).toBe(true);
    expect(hosts.has('berth.internal')).toBe(true);
    expect(hosts.has('localhost')).toBe(true);
  });

  it('a Host header is matched in any letter case and any spelling of an IPv6 literal, with the port it must carry; anything not shaped as a host is refused', () => {
    const hosts = allowedHosts('127.0.0.1', 7777, ifaces);
    for (const h of ['LOCALHOST:7777', 'LocalHost:7777', '[::1]:7777', '[0:0:0:0:0:0:0:1]:7777', '[0::1]:7777', '127.0.0.1:7777']) expect(hostAllowed(h, hosts), h).toBe(true);
    for (const h of [undefined, '', 'localhost', 'localhost:7778', 'evil.example:7777', 'localhost:7777@evil.example', 'user@localhost:7777', 'localhost:7777 x', '[::1]', '[::2]:7777', '[localhost]:7777', '[::1:7777'])
      expect(hostAllowed(h, hosts), String(h)).toBe(false);
  });
});
