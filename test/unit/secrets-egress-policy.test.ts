import { describe, expect, it } from 'vitest';
import { checkEgressPolicy, EnvironmentSchema, egressRisks, networkRunRecords, privateRangeOf } from '../../environment';
import { isBerthError } from '../../host/errors';
import { isPrivateAddress } from '../../host/egress';

const HOST = ['builder-7', '203.0.113.7', '127.0.0.1'];

const envWith = (allow: string[], allowOverride?: boolean, mode: 'none' | 'allowlist' | 'open' = 'allowlist') =>
  EnvironmentSchema.parse({
    kernel: { name: 'berth', version: '0.1.0', compatible: '^0.1.0' },
    image: { ref: 'berth/tiny:latest' },
    network: { mode, allow, ...(allowOverride === undefined ? {} : { allowOverride }) },
  });

describe('egress allow-list risks', () => {
  it('classifies private ranges, local names, the host itself and top-level wildcards', () => {
    expect(egressRisks(['10.1.2.3:80', '172.17.0.1:8080', '169.254.169.254:80', 'localhost:5432', 'db.internal:5432', 'builder-7:22', '203.0.113.7:443', '*.com:443'], HOST).map((r) => [r.pattern, r.kind])).toEqual([
      ['10.1.2.3:80', 'private-address'],
      ['172.17.0.1:8080', 'private-address'],
      ['169.254.169.254:80', 'private-address'],
      ['localhost:5432', 'local-name'],
      ['db.internal:5432', 'local-name'],
      ['builder-7:22', 'host-address'],
      ['203.0.113.7:443', 'host-address'],
      ['*.com:443', 'wildcard'],
    ]);
  });

  it('accepts public names, public addresses and multi-label wildcards', () => {
    expect(egressRisks(['api.example.com:443', '*.example.org:443', '93.184.216.34:80', '172.32.0.1:80'], HOST)).toEqual([]);
  });

  it('knows the private range of an address and nothing for a public one', () => {
    expect(privateRangeOf('192.168.1.1')).toBe('192.168.0.0/16 (private)');
    expect(privateRangeOf('100.64.0.1')).toBe('100.64.0.0/10 (carrier-grade NAT)');
    expect(privateRangeOf('8.8.8.8')).toBeUndefined();
    expect(privateRangeOf('example.com')).toBeUndefined();
  });
});

describe('checkEgressPolicy', () => {
  it('refuses a risky pattern without the override, naming the pattern, the reason and the field', () => {
    const err = (() => {
      try {
        checkEgressPolicy(envWith(['api.example.com:443', '10.0.0.8:6379']), HOST);
      } catch (e) {
        return e;
      }
    })();
    expect(isBerthError(err, 'manifest_unsafe_egress')).toBe(true);
    expect((err as Error).message).toBe('network.allow: "10.0.0.8:6379" is refused: 10.0.0.8 is in 10.0.0.0/8 (private); set network.allowOverride: true to allow it explicitly');
    expect((err as { details: { issues: Array<{ path: string }> } }).details.issues[0]!.path).toBe('network.allow.1');
  });

  it('returns the risks for the caller to record when the override is set', () => {
    expect(checkEgressPolicy(envWith(['10.0.0.8:6379'], true), HOST)).toEqual([{ pattern: '10.0.0.8:6379', kind: 'private-address', why: '10.0.0.8 is in 10.0.0.0/8 (private)' }]);
    expect(checkEgressPolicy(envWith(['api.example.com:443']), HOST)).toEqual([]);
  });

  it("refuses this machine's own loopback address by default", () => {
    expect(() => checkEgressPolicy(envWith(['127.0.0.1:8080']))).toThrow(/this host's own name or address/);
  });
});

describe('open mode', () => {
  it('opens only addresses of this host, and those only with the override', () => {
    expect(() => checkEgressPolicy(envWith(['8.8.8.8:53'], true, 'open'), HOST)).toThrow(/network\.allow\.0: 8\.8\.8\.8:53 is not an address of this host/);
    expect(() => checkEgressPolicy(envWith(['203.0.113.7:8080'], undefined, 'open'), HOST)).toThrow(/"203\.0\.113\.7:8080" is refused: "203\.0\.113\.7" is this host's own/);
    expect(checkEgressPolicy(envWith(['203.0.113.7:8080'], true, 'open'), HOST)).toHaveLength(1);
    expect(checkEgressPolicy(envWith([], undefined, 'open'), HOST)).toEqual([]);
  });

  it('makes every run record open mode and each overridden risk; an ordinary allow list records nothing', () => {
    expect(networkRunRecords(envWith([], undefined, 'open'), HOST)).toEqual([{ kind: 'egress.open', body: { mode: 'open', allow: [] } }]);
    expect(networkRunRecords(envWith(['203.0.113.7:8080'], true, 'open'), HOST).map((r) => r.kind)).toEqual(['egress.open', 'egress.override']);
    expect(networkRunRecords(envWith(['api.example.com:443']), HOST)).toEqual([]);
    expect(networkRunRecords(envWith(['10.0.0.8:6379'], true), HOST)).toEqual([
      { kind: 'egress.override', body: { mode: 'allowlist', allow: ['10.0.0.8:6379'], risks: [{ pattern: '10.0.0.8:6379', kind: 'private-address', why: '10.0.0.8 is in 10.0.0.0/8 (private)' }] } },
    ]);
  });
});

describe('isPrivateAddress (the proxy refuses names resolving there, against DNS rebinding)', () => {
  it('knows private, loopback, link-local and unspecified addresses in every spelling, and public ones', () => {
    for (const a of ['10.1.2.3', '127.0.0.1', '169.254.169.254', '::1', '::', 'fd00::2', 'fc12:3::1', 'fe80::1', 'FEBF::1', '::ffff:10.0.0.1', '::FFFF:127.0.0.1']) expect(isPrivateAddress(a), a).toBe(true);
    for (const a of ['203.0.113.80', '8.8.8.8', '2001:db8::1', '::ffff:8.8.8.8', 'fec0::1']) expect(isPrivateAddress(a), a).toBe(false);
  });
});
