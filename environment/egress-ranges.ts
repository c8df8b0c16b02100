import { lookup } from 'node:dns/promises';
import { hostname, networkInterfaces } from 'node:os';

/** IPv4 ranges that are never the public internet: a sandbox reaching them reaches the host's neighbours. */
const PRIVATE_V4: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private (Docker networks)'],
  ['192.168.0.0', 16, 'private'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

const v4 = (ip: string): number | undefined => {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return undefined;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
};

/** Whether IPv4 `ip` lies in `base/bits`. */
export function inV4Range(ip: string, base: string, bits: number): boolean {
  const n = v4(ip);
  const b = v4(base);
  if (n === undefined || b === undefined) return false;
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return (n & mask) >>> 0 === (b & mask) >>> 0;
}

/** The private range an IPv4 address falls in, as `a.b.c.d/n (kind)`, or undefined for a public one. */
export function privateRangeOf(ip: string): string | undefined {
  if (v4(ip) === undefined) return undefined;
  for (const [base, bits, kind] of PRIVATE_V4) if (inV4Range(ip, base, bits)) return `${base}/${bits} (${kind})`;
  return undefined;
}

/**
 * The non-public range of any address (IPv4, IPv6, IPv4-mapped IPv6), or undefined for a public
 * one: what a name resolving there is treated as.
 */
export function addressRangeOf(address: string): string | undefined {
  const a = address.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  if (v4(a) !== undefined) return privateRangeOf(a);
  if (a === '::1') return '::1/128 (loopback)';
  if (a === '::') return '::/128 (unspecified)';
  if (/^f[cd][0-9a-f]{0,2}:/.test(a)) return 'fc00::/7 (unique local)';
  if (/^fe[89ab][0-9a-f]?:/.test(a)) return 'fe80::/10 (link-local)';
  return undefined;
}

/** This machine's names and addresses: a sandbox allowed to reach them reaches the host's services. */
export function hostAddresses(): string[] {
  const out = new Set<string>([hostname().toLowerCase()]);
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(a.address.toLowerCase());
  return [...out];
}

/** Every address a name resolves to; empty when it does not resolve (or not within the bound). */
export type NameResolver = (name: string) => Promise<string[]>;

/**
 * The host's own resolver (getaddrinfo: `/etc/hosts`, search domains, DNS), as the proxy uses it
 * at connect time. Bounded, so validation never hangs on a dead DNS server: an unresolved name is
 * checked again, by the proxy, when the sandbox asks for it.
 */
export const hostResolver: NameResolver = async (name) => {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string[]>((r) => (timer = setTimeout(() => r([]), 3000)));
  const found = lookup(name, { all: true, verbatim: true }).then((l) => l.map((a) => a.address), () => []);
  try {
    return await Promise.race([found, timeout]);
  } finally {
    clearTimeout(timer);
  }
};

/** A destination range open mode does not forward to, and why. */
export interface BlockedRange {
  cidr: string;
  why: string;
}

const v4String = (n: number) => [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.');

/** Interfaces Docker makes (its bridges and their veth ends): Docker's own isolation covers them. */
const DOCKER_IFACE = /^(docker\d*|br-[0-9a-f]{12}|veth)/;

/**
 * What open mode refuses to forward to, besides this host (closed by INPUT rules) and other Docker
 * networks (Docker's isolation): the link-local range (cloud metadata at 169.254.169.254), the
 * subnet of every non-Docker interface of this machine (its LAN neighbours, whatever their
 * addresses), and the whole private range such a subnet lies in (the rest of that internal network).
 */
export function openModeBlockedRanges(ifaces: ReturnType<typeof networkInterfaces> = networkInterfaces()): BlockedRange[] {
  const out: BlockedRange[] = [{ cidr: '169.254.0.0/16', why: 'link-local (cloud metadata)' }];
  const add = (r: BlockedRange) => {
    if (!out.some((o) => o.cidr === r.cidr)) out.push(r);
  };
  for (const [name, list] of Object.entries(ifaces)) {
    if (DOCKER_IFACE.test(name)) continue;
    for (const a of list ?? []) {
      if (a.internal || a.family !== 'IPv4' || !a.cidr) continue;
      const bits = Number(a.cidr.split('/')[1]);
      const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
      add({ cidr: `${v4String((v4(a.address)! & mask) >>> 0)}/${bits}`, why: `${name}'s network (LAN neighbours)` });
      const range = privateRangeOf(a.address);
      if (range && !range.startsWith('127.') && !range.startsWith('169.254.')) add({ cidr: range.split(' ')[0]!, why: `the private range of ${name} (${range})` });
    }
  }
  return out;
}

/** The blocked range an IPv4 address lies in, or undefined. */
export function blockedRangeOf(address: string, ranges: readonly BlockedRange[]): BlockedRange | undefined {
  return ranges.find((r) => {
    const [base, bits] = r.cidr.split('/');
    return inV4Range(address, base!, Number(bits));
  });
}
