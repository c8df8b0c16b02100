import { networkInterfaces, hostname } from 'node:os';
import { BerthError } from '../host/errors';
import type { ManifestIssue } from './issues';
import type { Environment } from './schema';

/** Why an allow pattern reaches further than a sandbox should without an explicit override. */
export type EgressRiskKind = 'wildcard' | 'private-address' | 'local-name' | 'host-address';

export interface EgressRisk {
  pattern: string;
  kind: EgressRiskKind;
  why: string;
}

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

const LOCAL_SUFFIXES = ['localhost', 'local', 'internal', 'lan', 'home.arpa'];

const v4 = (ip: string): number | undefined => {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return undefined;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
};

/** The private range an IPv4 address falls in, as `a.b.c.d/n (kind)`, or undefined for a public one. */
export function privateRangeOf(ip: string): string | undefined {
  const n = v4(ip);
  if (n === undefined) return undefined;
  for (const [base, bits, kind] of PRIVATE_V4) {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    if ((n & mask) >>> 0 === (v4(base)! & mask) >>> 0) return `${base}/${bits} (${kind})`;
  }
  return undefined;
}

/** This machine's names and addresses: a sandbox allowed to reach them reaches the host's services. */
export function hostAddresses(): string[] {
  const out = new Set<string>([hostname().toLowerCase()]);
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(a.address.toLowerCase());
  return [...out];
}

/** Every allow pattern that needs `network.allowOverride`, with the reason. */
export function egressRisks(allow: readonly string[], host: readonly string[] = hostAddresses()): EgressRisk[] {
  const risks: EgressRisk[] = [];
  for (const pattern of allow) {
    const name = pattern.slice(0, pattern.lastIndexOf(':'));
    const bare = name.replace(/^\*\./, '');
    const range = privateRangeOf(bare);
    if (name === '*' || (name.startsWith('*.') && !bare.includes('.'))) {
      risks.push({ pattern, kind: 'wildcard', why: `"${name}" matches every name under a top-level domain` });
    } else if (host.includes(bare)) {
      risks.push({ pattern, kind: 'host-address', why: `"${bare}" is this host's own name or address` });
    } else if (range) {
      risks.push({ pattern, kind: 'private-address', why: `${bare} is in ${range}` });
    } else if (LOCAL_SUFFIXES.some((s) => bare === s || bare.endsWith(`.${s}`))) {
      risks.push({ pattern, kind: 'local-name', why: `"${bare}" is a local name (resolves to the host or its network)` });
    }
  }
  return risks;
}

/**
 * Refuses an allow list that reaches a private range, the host itself or everything, unless the
 * manifest sets `network.allowOverride: true`; then returns the risks, which the caller records
 * on the run so the decision is never silent.
 */
export function checkEgressPolicy(env: Environment, host: readonly string[] = hostAddresses()): EgressRisk[] {
  if (env.network.mode === 'open') {
    // checkSupported already refused names; an address that is not this host's opens nothing.
    const foreign = env.network.allow.map((p, i) => [p, i] as const).filter(([p]) => !host.includes(p.slice(0, p.lastIndexOf(':'))));
    if (foreign.length > 0) {
      const issues: ManifestIssue[] = foreign.map(([p, i]) => ({
        path: `network.allow.${i}`,
        expected: `an address of this host (${host.filter((a) => /^\d+\.\d+\.\d+\.\d+$/.test(a)).join(', ')}) with a port`,
        found: JSON.stringify(p),
        message: `network.allow.${i}: ${p} is not an address of this host; open mode reaches outside hosts without listing them`,
      }));
      throw new BerthError('manifest_invalid', issues.map((i) => i.message).join('; '), { details: { issues } });
    }
  }
  const risks = egressRisks(env.network.allow, host);
  if (risks.length === 0 || env.network.allowOverride === true) return risks;
  const issues: ManifestIssue[] = risks.map((r) => ({
    path: `network.allow.${env.network.allow.indexOf(r.pattern)}`,
    expected: 'a public host:port, or network.allowOverride: true',
    found: JSON.stringify(r.pattern),
    message: r.why,
  }));
  const first = risks[0]!;
  throw new BerthError(
    'manifest_unsafe_egress',
    `network.allow: "${first.pattern}" is refused: ${first.why}${risks.length > 1 ? ` (and ${risks.length - 1} more)` : ''}; set network.allowOverride: true to allow it explicitly`,
    { details: { issues } },
  );
}

/** An entry every run of an environment carries about its network, so no run relies on a decision silently. */
export interface NetworkRunRecord {
  kind: 'egress.open' | 'egress.override';
  body: { mode: Environment['network']['mode']; allow: string[]; risks?: EgressRisk[] };
}

/**
 * What a run must record about its network: `egress.open` for open mode (every outside host
 * reachable, unaudited), `egress.override` with each risk the override accepted. Call after
 * {@link checkEgressPolicy} has accepted the manifest.
 */
export function networkRunRecords(env: Environment, host?: readonly string[]): NetworkRunRecord[] {
  const { mode, allow } = env.network;
  const out: NetworkRunRecord[] = [];
  if (mode === 'open') out.push({ kind: 'egress.open', body: { mode, allow: [...allow] } });
  const risks = env.network.allowOverride === true ? egressRisks(allow, host) : [];
  if (risks.length > 0) out.push({ kind: 'egress.override', body: { mode, allow: [...allow], risks } });
  return out;
}
