import { isIP } from 'node:net';
import { BerthError } from '../host/errors';
import { addressRangeOf, blockedRangeOf, hostAddresses, hostResolver, openModeBlockedRanges, privateRangeOf, type BlockedRange, type NameResolver } from './egress-ranges';
import type { ManifestIssue } from './issues';
import type { Environment } from './schema';

/** Why an allow pattern reaches further than a sandbox should without an explicit override. */
export type EgressRiskKind = 'wildcard' | 'private-address' | 'local-name' | 'host-address';

export interface EgressRisk {
  pattern: string;
  kind: EgressRiskKind;
  why: string;
}

const LOCAL_SUFFIXES = ['localhost', 'local', 'internal', 'lan', 'home.arpa'];

/** Names of the allow list as the host's resolver sees them, looked up once: name → addresses. */
export type ResolvedNames = ReadonlyMap<string, readonly string[]>;

/**
 * Resolves every exact name of an allow list (not wildcards, not addresses) through the host's
 * resolver, so a name that is really a private or host address (a single-label name, an
 * `/etc/hosts` entry, a split-horizon DNS answer) is judged as that address.
 */
export async function resolveAllowNames(allow: readonly string[], resolve: NameResolver = hostResolver): Promise<ResolvedNames> {
  const names = [...new Set(allow.map((p) => p.slice(0, p.lastIndexOf(':'))).filter((n) => !n.startsWith('*') && isIP(n) === 0))];
  return new Map(await Promise.all(names.map(async (n) => [n, await resolve(n)] as const)));
}

/**
 * Every allow pattern that needs to be named in `network.allowOverride`, with the reason. A name
 * is judged by its own form first, then by what `resolved` says it resolves to.
 */
export function egressRisks(allow: readonly string[], host: readonly string[] = hostAddresses(), resolved: ResolvedNames = new Map()): EgressRisk[] {
  const risks: EgressRisk[] = [];
  for (const pattern of allow) {
    const name = pattern.slice(0, pattern.lastIndexOf(':'));
    const bare = name.replace(/^\*\./, '');
    const range = privateRangeOf(bare);
    const addresses = name.startsWith('*') ? [] : (resolved.get(name) ?? []);
    const atHost = addresses.find((a) => host.includes(a.toLowerCase()));
    const atPrivate = addresses.find((a) => addressRangeOf(a) !== undefined);
    if (name === '*' || (name.startsWith('*.') && !bare.includes('.'))) {
      risks.push({ pattern, kind: 'wildcard', why: `"${name}" matches every name under a top-level domain` });
    } else if (host.includes(bare)) {
      risks.push({ pattern, kind: 'host-address', why: `"${bare}" is this host's own name or address` });
    } else if (range) {
      risks.push({ pattern, kind: 'private-address', why: `${bare} is in ${range}` });
    } else if (atHost) {
      risks.push({ pattern, kind: 'host-address', why: `"${bare}" resolves to ${atHost}, this host's own address, through this host's resolver` });
    } else if (atPrivate) {
      risks.push({ pattern, kind: 'private-address', why: `"${bare}" resolves to ${atPrivate} (in ${addressRangeOf(atPrivate)}) through this host's resolver` });
    } else if (LOCAL_SUFFIXES.some((s) => bare === s || bare.endsWith(`.${s}`))) {
      risks.push({ pattern, kind: 'local-name', why: `"${bare}" is a local name (resolves to the host or its network)` });
    } else if (!name.startsWith('*') && isIP(bare) === 0 && !bare.includes('.')) {
      risks.push({ pattern, kind: 'local-name', why: `"${bare}" is a single-label name (resolved through this host's hosts file and search domains)` });
    }
  }
  return risks;
}

/** How a check sees this machine: its addresses and its resolver (both replaceable in tests). */
export interface EgressHostView {
  host?: readonly string[];
  resolve?: NameResolver;
  /** What open mode blocks on this machine (see {@link openModeBlockedRanges}). */
  blocked?: readonly BlockedRange[];
}

/**
 * Refuses an allow list that reaches a private range, the host itself (also by a name resolving
 * there) or everything, unless `network.allowOverride` names that very pattern; returns the
 * accepted risks, which the caller records on the run so the decision is never silent.
 */
export async function checkEgressPolicy(env: Environment, view: EgressHostView = {}): Promise<EgressRisk[]> {
  // Nothing listed, so nothing to judge: no read of the machine's interfaces (twice per submit, on
  // the path of every agent turn and MCP call).
  if (env.network.allow.length === 0) return [];
  const host = view.host ?? hostAddresses();
  const blocked = view.blocked ?? openModeBlockedRanges();
  const extra: EgressRisk[] = [];
  if (env.network.mode === 'open') {
    // checkSupported already refused names. An address that is neither this host's nor in a range
    // open mode blocks is reachable anyway: listing it opens nothing, so it is refused as a mistake.
    const addressOf = (p: string) => p.slice(0, p.lastIndexOf(':'));
    const foreign = env.network.allow.map((p, i) => [p, i] as const).filter(([p]) => !host.includes(addressOf(p)) && !blockedRangeOf(addressOf(p), blocked));
    if (foreign.length > 0) {
      const issues: ManifestIssue[] = foreign.map(([p, i]) => ({
        path: `network.allow.${i}`,
        expected: `an address of this host (${host.filter((a) => /^\d+\.\d+\.\d+\.\d+$/.test(a)).join(', ')}) or of a range open mode blocks (${blocked.map((b) => b.cidr).join(', ')}), with a port`,
        found: JSON.stringify(p),
        message: `network.allow.${i}: ${p} is not an address of this host or of a range open mode blocks; open mode reaches other outside hosts without listing them`,
      }));
      throw new BerthError('manifest_invalid', issues.map((i) => i.message).join('; '), { details: { issues } });
    }
    // A LAN address outside the private ranges is still a neighbour: listing it needs the override too.
    for (const p of env.network.allow) {
      const range = blockedRangeOf(addressOf(p), blocked);
      if (range && !host.includes(addressOf(p)) && !privateRangeOf(addressOf(p))) extra.push({ pattern: p, kind: 'private-address', why: `${addressOf(p)} is in ${range.cidr} (${range.why}), which open mode blocks` });
    }
  }
  const allow = env.network.allow;
  const risks = [...egressRisks(allow, host, await resolveAllowNames(allow, view.resolve)), ...extra].sort((a, b) => allow.indexOf(a.pattern) - allow.indexOf(b.pattern));
  const named = new Set(env.network.allowOverride ?? []);
  const refused = risks.filter((r) => !named.has(r.pattern));
  if (refused.length === 0) return risks;
  const issues: ManifestIssue[] = refused.map((r) => ({
    path: `network.allow.${env.network.allow.indexOf(r.pattern)}`,
    expected: `a public host:port, or the pattern named in network.allowOverride`,
    found: JSON.stringify(r.pattern),
    message: r.why,
  }));
  const first = refused[0]!;
  throw new BerthError(
    'manifest_unsafe_egress',
    `network.allow: "${first.pattern}" is refused: ${first.why}${refused.length > 1 ? ` (and ${refused.length - 1} more)` : ''}; name it in network.allowOverride (allowOverride: [${refused.map((r) => JSON.stringify(r.pattern)).join(', ')}]) to allow it explicitly`,
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
 * reachable but the blocked ranges, unaudited), `egress.override` with each risk the override
 * accepted. Pass the risks {@link checkEgressPolicy} returned when it accepted the manifest.
 */
export function networkRunRecords(env: Environment, accepted: readonly EgressRisk[]): NetworkRunRecord[] {
  const { mode, allow } = env.network;
  const out: NetworkRunRecord[] = [];
  if (mode === 'open') out.push({ kind: 'egress.open', body: { mode, allow: [...allow] } });
  if (accepted.length > 0) out.push({ kind: 'egress.override', body: { mode, allow: [...allow], risks: [...accepted] } });
  return out;
}
