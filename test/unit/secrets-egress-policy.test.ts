import { describe, expect, it } from 'vitest';
import { checkEgressPolicy, EnvironmentSchema, egressRisks, networkRunRecords, openModeBlockedRanges, privateRangeOf, resolveAllowNames } from '../../environment';
import { isBerthError } from '../../host/errors';
import { isPrivateAddress } from '../../host/egress';
import { DropAudit, type DroppedAttempt } from '../../host/sandbox/drop-audit';
import { parseDropLine } from '../../host/sandbox/drop-log';

const HOST = ['builder-7', '203.0.113.7', '127.0.0.1'];
/** The host's resolver as these tests see it: `db` is an /etc/hosts entry, `cache.example.com` a split-horizon name. */
const NAMES: Record<string, string[]> = { db: ['10.0.0.9'], 'cache.example.com': ['192.168.1.20'], 'me.example.com': ['203.0.113.7'], 'api.example.com': ['93.184.216.34'] };
const VIEW = { host: HOST, resolve: async (n: string) => NAMES[n] ?? [] };
const refusal = async (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as Error & { code: string; details: { issues: Array<{ path: string }> } });

const envWith = (allow: string[], allowOverride?: string[], mode: 'none' | 'allowlist' | 'open' = 'allowlist') =>
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
  it('refuses a risky pattern without the override, naming the pattern, the reason and the field', async () => {
    const err = await refusal(checkEgressPolicy(envWith(['api.example.com:443', '10.0.0.8:6379']), VIEW));
    expect(isBerthError(err, 'manifest_unsafe_egress')).toBe(true);
    expect(err!.message).toBe('network.allow: "10.0.0.8:6379" is refused: 10.0.0.8 is in 10.0.0.0/8 (private); name it in network.allowOverride (allowOverride: ["10.0.0.8:6379"]) to allow it explicitly');
    expect(err!.details.issues[0]!.path).toBe('network.allow.1');
  });

  it('returns the risks for the caller to record when the override names them', async () => {
    expect(await checkEgressPolicy(envWith(['10.0.0.8:6379'], ['10.0.0.8:6379']), VIEW)).toEqual([{ pattern: '10.0.0.8:6379', kind: 'private-address', why: '10.0.0.8 is in 10.0.0.0/8 (private)' }]);
    expect(await checkEgressPolicy(envWith(['api.example.com:443']), VIEW)).toEqual([]);
  });

  it('refuses an allow list with a name and an address needing the override when the override names only the address', async () => {
    const env = envWith(['localhost:8080', '10.0.0.8:6379'], ['10.0.0.8:6379']);
    const err = await refusal(checkEgressPolicy(env, VIEW));
    expect(isBerthError(err, 'manifest_unsafe_egress')).toBe(true);
    expect(err!.message).toMatch(/^network\.allow: "localhost:8080" is refused: "localhost" is a local name .*allowOverride: \["localhost:8080"\]/);
    expect(err!.details.issues.map((i) => i.path)).toEqual(['network.allow.0']);
    // Naming both is accepted, and both are recorded.
    expect((await checkEgressPolicy(envWith(['localhost:8080', '10.0.0.8:6379'], ['localhost:8080', '10.0.0.8:6379']), VIEW)).map((r) => r.pattern)).toEqual(['localhost:8080', '10.0.0.8:6379']);
  });

  it('judges a name by the address the host resolves it to: an /etc/hosts entry, a split-horizon name, a name of this host', async () => {
    expect(egressRisks(['db:5432', 'cache.example.com:6379', 'me.example.com:22', 'api.example.com:443'], HOST, new Map(Object.entries(NAMES))).map((r) => [r.pattern, r.kind, r.why])).toEqual([
      ['db:5432', 'private-address', '"db" resolves to 10.0.0.9 (in 10.0.0.0/8 (private)) through this host\'s resolver'],
      ['cache.example.com:6379', 'private-address', '"cache.example.com" resolves to 192.168.1.20 (in 192.168.0.0/16 (private)) through this host\'s resolver'],
      ['me.example.com:22', 'host-address', '"me.example.com" resolves to 203.0.113.7, this host\'s own address, through this host\'s resolver'],
    ]);
    const err = await refusal(checkEgressPolicy(envWith(['cache.example.com:6379', 'db:5432'], ['db:5432']), VIEW));
    expect(err!.message).toContain('"cache.example.com:6379" is refused: "cache.example.com" resolves to 192.168.1.20');
  });

  it('treats a single-label name as local even when it does not resolve, and uses the real resolver by default', async () => {
    expect(egressRisks(['buildcache:80'], HOST).map((r) => r.kind)).toEqual(['local-name']);
    // localhost is in every hosts file; the default view asks this machine's resolver.
    expect((await refusal(checkEgressPolicy(envWith(['localhost:80']))))!.message).toMatch(/"localhost:80" is refused/);
    expect(await resolveAllowNames(['localhost:80', '*.example.org:443', '10.0.0.1:80'])).toEqual(new Map([['localhost', expect.arrayContaining(['127.0.0.1'])]]));
  });

  it("refuses this machine's own loopback address by default", async () => {
    await expect(checkEgressPolicy(envWith(['127.0.0.1:8080']))).rejects.toThrow(/this host's own name or address/);
  });

  it('refuses the boolean override of older manifests with a migration message, and an override of a pattern not listed', () => {
    const parse = (network: object) => EnvironmentSchema.safeParse({ kernel: { name: 'berth', version: '0.1.0', compatible: '^0.1.0' }, image: { ref: 'berth/tiny:latest' }, network });
    const old = parse({ mode: 'allowlist', allow: ['10.0.0.8:6379'], allowOverride: true });
    expect(old.success).toBe(false);
    expect(old.error!.issues[0]!.message).toBe('the list of network.allow patterns the override covers, such as ["10.0.0.8:6379"] (allowOverride: true covered every pattern at once and is no longer accepted; name each pattern that needs it)');
    expect(old.error!.issues[0]!.path).toEqual(['network', 'allowOverride']);
    const stray = parse({ mode: 'allowlist', allow: ['10.0.0.8:6379'], allowOverride: ['10.0.0.9:6379'] });
    expect(stray.error!.issues.map((i) => [i.path.join('.'), i.message])).toEqual([['network.allowOverride.0', 'a pattern listed in network.allow ("10.0.0.9:6379" is not)']]);
  });
});

describe('open mode', () => {
  it('opens only addresses of this host, and those only with the override', async () => {
    await expect(checkEgressPolicy(envWith(['8.8.8.8:53'], ['8.8.8.8:53'], 'open'), VIEW)).rejects.toThrow(/network\.allow\.0: 8\.8\.8\.8:53 is not an address of this host/);
    await expect(checkEgressPolicy(envWith(['203.0.113.7:8080'], undefined, 'open'), VIEW)).rejects.toThrow(/"203\.0\.113\.7:8080" is refused: "203\.0\.113\.7" is this host's own/);
    expect(await checkEgressPolicy(envWith(['203.0.113.7:8080'], ['203.0.113.7:8080'], 'open'), VIEW)).toHaveLength(1);
    expect(await checkEgressPolicy(envWith([], undefined, 'open'), VIEW)).toEqual([]);
  });

  it('makes every run record open mode and each overridden risk; an ordinary allow list records nothing', async () => {
    const records = async (env: ReturnType<typeof envWith>) => networkRunRecords(env, await checkEgressPolicy(env, VIEW));
    expect(await records(envWith([], undefined, 'open'))).toEqual([{ kind: 'egress.open', body: { mode: 'open', allow: [] } }]);
    expect((await records(envWith(['203.0.113.7:8080'], ['203.0.113.7:8080'], 'open'))).map((r) => r.kind)).toEqual(['egress.open', 'egress.override']);
    expect(await records(envWith(['api.example.com:443']))).toEqual([]);
    expect(await records(envWith(['10.0.0.8:6379'], ['10.0.0.8:6379']))).toEqual([
      { kind: 'egress.override', body: { mode: 'allowlist', allow: ['10.0.0.8:6379'], risks: [{ pattern: '10.0.0.8:6379', kind: 'private-address', why: '10.0.0.8 is in 10.0.0.0/8 (private)' }] } },
    ]);
  });
});

describe('open mode: what it does not reach', () => {
  const IFACES = {
    lo: [{ address: '127.0.0.1', netmask: '255.0.0.0', family: 'IPv4', mac: '', internal: true, cidr: '127.0.0.1/8' }],
    eth0: [{ address: '192.168.1.23', netmask: '255.255.255.0', family: 'IPv4', mac: '', internal: false, cidr: '192.168.1.23/24' }],
    wlan0: [{ address: '198.51.100.7', netmask: '255.255.255.192', family: 'IPv4', mac: '', internal: false, cidr: '198.51.100.7/26' }],
    docker0: [{ address: '172.17.0.1', netmask: '255.255.0.0', family: 'IPv4', mac: '', internal: false, cidr: '172.17.0.1/16' }],
    'br-0123456789ab': [{ address: '172.18.0.1', netmask: '255.255.0.0', family: 'IPv4', mac: '', internal: false, cidr: '172.18.0.1/16' }],
  } as const;

  it("blocks link-local and each LAN's own subnet, plus the private range a LAN lies in; Docker's bridges are left to Docker", () => {
    expect(openModeBlockedRanges(IFACES as never)).toEqual([
      { cidr: '169.254.0.0/16', why: 'link-local (cloud metadata)' },
      { cidr: '192.168.1.0/24', why: "eth0's network (LAN neighbours)" },
      { cidr: '192.168.0.0/16', why: 'the private range of eth0 (192.168.0.0/16 (private))' },
      { cidr: '198.51.100.0/26', why: "wlan0's network (LAN neighbours)" },
    ]);
  });

  it('lets an open manifest list a blocked address only with the override, and still refuses other outside addresses', async () => {
    const view = { ...VIEW, blocked: openModeBlockedRanges(IFACES as never) };
    await expect(checkEgressPolicy(envWith(['192.168.1.50:5432'], undefined, 'open'), view)).rejects.toThrow(/"192\.168\.1\.50:5432" is refused: 192\.168\.1\.50 is in 192\.168\.0\.0\/16 \(private\)/);
    await expect(checkEgressPolicy(envWith(['198.51.100.9:80'], undefined, 'open'), view)).rejects.toThrow(/"198\.51\.100\.9:80" is refused: 198\.51\.100\.9 is in 198\.51\.100\.0\/26 \(wlan0's network \(LAN neighbours\)\), which open mode blocks/);
    expect((await checkEgressPolicy(envWith(['198.51.100.9:80', '169.254.169.254:80'], ['198.51.100.9:80', '169.254.169.254:80'], 'open'), view)).map((r) => r.pattern)).toEqual(['198.51.100.9:80', '169.254.169.254:80']);
    await expect(checkEgressPolicy(envWith(['8.8.8.8:53'], ['8.8.8.8:53'], 'open'), view)).rejects.toThrow(/8\.8\.8\.8:53 is not an address of this host or of a range open mode blocks/);
  });
});

describe('isPrivateAddress (the proxy refuses names resolving there, against DNS rebinding)', () => {
  it('knows private, loopback, link-local and unspecified addresses in every spelling, and public ones', () => {
    for (const a of ['10.1.2.3', '127.0.0.1', '169.254.169.254', '::1', '::', 'fd00::2', 'fc12:3::1', 'fe80::1', 'FEBF::1', '::ffff:10.0.0.1', '::FFFF:127.0.0.1']) expect(isPrivateAddress(a), a).toBe(true);
    for (const a of ['203.0.113.80', '8.8.8.8', '2001:db8::1', '::ffff:8.8.8.8', 'fec0::1']) expect(isPrivateAddress(a), a).toBe(false);
  });
});

describe('dropped packets read back from the kernel log', () => {
  const line = (sport: number, dport: number, dst = '172.18.0.1') =>
    parseDropLine(`4,812,291859332,-;berth-drop IN=br-0123456789ab OUT= MAC=02:42 SRC=172.18.0.2 DST=${dst} LEN=60 TOS=0x00 PREC=0x00 TTL=64 ID=1 DF PROTO=TCP SPT=${sport} DPT=${dport} WINDOW=64240 RES=0x00 SYN URGP=0 `)!;

  it("parses Berth's LOG lines and nothing else", () => {
    expect(line(40000, 22)).toEqual({ kind: 'drop', in: 'br-0123456789ab', out: '', src: '172.18.0.2', dst: '172.18.0.1', proto: 'TCP', sport: 40000, dport: 22 });
    expect(parseDropLine('6,813,291859400,-;docker0: port 1(veth19314ed) entered disabled state')).toBeUndefined();
    expect(parseDropLine('4,814,1,-;berth-proxy IN=docker0 OUT= SRC=172.17.0.5 DST=172.18.0.1 PROTO=TCP SPT=5 DPT=3128 SYN')).toMatchObject({ kind: 'proxy', in: 'docker0', dport: 3128 });
  });

  it('counts a retransmitted SYN as the same attempt and groups attempts per destination and port in one window', () => {
    let now = 1000;
    const flushed: Array<[string, DroppedAttempt[]]> = [];
    const audit = new DropAudit({ now: () => now, flush: (l, a) => flushed.push([l, a]), windowMs: 60_000 });
    for (const [sport, dport] of [[40000, 22], [40000, 22], [40001, 80], [40002, 80], [40003, 5432]] as const) {
      audit.add('lease_a', line(sport, dport), 'dropped');
      now += 1000;
    }
    audit.flush();
    expect(flushed.map(([l, rows]) => [l, rows.map((r) => [r.target, r.count])])).toEqual([['lease_a', [['172.18.0.1:22', 1], ['172.18.0.1:80', 2], ['172.18.0.1:5432', 1]]]]);
    // Past the retransmission horizon the same tuple is a new attempt.
    now += 200_000;
    audit.add('lease_a', line(40000, 22), 'dropped');
    audit.flush();
    expect(flushed[1]![1].map((r) => [r.target, r.count])).toEqual([['172.18.0.1:22', 1]]);
  });

  it('keeps at most 50 destinations per window and sums the rest into one row', () => {
    const flushed: DroppedAttempt[][] = [];
    const audit = new DropAudit({ now: () => 1, flush: (_l, a) => flushed.push(a), windowMs: 60_000 });
    for (let p = 1; p <= 60; p++) audit.add('lease_a', line(30000 + p, p), 'dropped');
    audit.flush();
    expect(flushed[0]).toHaveLength(51);
    expect(flushed[0]!.at(-1)).toMatchObject({ target: '*', count: 10 });
  });
});
