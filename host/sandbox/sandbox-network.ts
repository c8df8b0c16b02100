import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';
import { BerthError } from '../errors';
import { engineError, isNotFound } from './engine-errors';
import { DROP_PREFIX } from './drop-log';
import { forwardingRules, LOG_LIMIT, type HostOpening, type Rule, type RuleTool } from './forward-rules';
import { LABEL } from './labels';

export type { HostOpening } from './forward-rules';

const run = promisify(execFile);

/** The proxy's port on every sandbox network's gateway. Fixed, so a restarted host listens where the container's HTTP_PROXY already points. */
export const EGRESS_PROXY_PORT = 3128;

/** Marks networks made for egress, so cleanup never touches another network. */
export const EGRESS_LABEL = 'berth.egress';

/** A per-sandbox `--internal` Docker network and the host bridge behind it. */
export interface SandboxNetwork {
  id: string;
  name: string;
  /** Host-side bridge interface (`br-` + 12 hex), the one the INPUT rules match. */
  bridge: string;
  /** The host's address on the network: where the egress proxy listens. */
  gateway: string;
  subnet: string;
}

/**
 * Creates the network of one lease: `--internal` for allowlist mode (no forwarding to the outside),
 * a plain bridge with NAT for open mode. Either way the host itself stays reachable through the
 * gateway and every other host address, which {@link isolateBridge} closes. `who.origin` (the
 * store's location, machine and pid labels) says which store made it, as a container's do: a host
 * killed between the network and its container leaves nothing else that does.
 */
export async function createSandboxNetwork(
  docker: Dockerode,
  who: { hostId: string; leaseId: string; runId?: string | null; sessionId?: string | null; storeId?: string; origin?: Record<string, string> },
  o: { internal: boolean } = { internal: true },
): Promise<SandboxNetwork> {
  const name = `berth-net-${who.leaseId}`;
  try {
    const created = await docker.createNetwork({
      Name: name,
      Driver: 'bridge',
      Internal: o.internal,
      CheckDuplicate: true,
      Labels: { ...who.origin, [LABEL.managed]: '1', [LABEL.host]: who.hostId, [LABEL.lease]: who.leaseId, [LABEL.store]: who.storeId ?? '', [EGRESS_LABEL]: '1', 'berth.run': who.runId ?? '', 'berth.session': who.sessionId ?? '' },
    });
    const info = (await created.inspect()) as { Id: string; IPAM?: { Config?: Array<{ Subnet?: string; Gateway?: string }> } };
    const cfg = info.IPAM?.Config?.[0];
    if (!cfg?.Gateway || !cfg.Subnet) throw new BerthError('network_setup_failed', `network ${name} has no gateway address`, { ids: { leaseId: who.leaseId } });
    return { id: info.Id, name, bridge: `br-${info.Id.slice(0, 12)}`, gateway: cfg.Gateway.split('/')[0]!, subnet: cfg.Subnet };
  } catch (err) {
    if (err instanceof BerthError) throw err;
    throw engineError('create sandbox network', err, { leaseId: who.leaseId });
  }
}

/** Removes a sandbox network; an already removed one is fine. Containers on it must be gone. */
export async function removeSandboxNetwork(docker: Dockerode, id: string): Promise<void> {
  try {
    await docker.getNetwork(id).remove();
  } catch (err) {
    if (!isNotFound(err)) throw engineError('remove sandbox network', err);
  }
}

/** The comment that names a rule's owner, so release and the sweeper delete exactly their own rules. */
export const ruleTag = (hostId: string, leaseId: string) => `berth:${hostId}:${leaseId}`;

const TOOLS: readonly RuleTool[] = ['iptables', 'ip6tables'];

/** Inserts `rules` at the top of `chain` in the order given (the first ends lowest); on failure removes every rule of `tag`. */
async function insertRules(rules: Rule[], tag: string, what: string, chain = 'INPUT'): Promise<void> {
  try {
    for (const [tool, r] of rules) await run(tool, ['-w', '-I', chain, ...r, '-m', 'comment', '--comment', tag]);
  } catch (err) {
    await removeBridgeRules((t) => t === tag).catch(() => {});
    throw new BerthError('network_setup_failed', `could not add ${chain} rules for ${what}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Closes the host to the sandbox: from the bridge, only replies to connections the host opened and
 * new TCP connections to the listed `openings` (host services an open manifest lists) are
 * accepted; everything else is logged (rate-bounded, prefix `berth-drop`) and dropped, IPv6
 * included (the engine gives these containers no IPv6, but a link-local address on the bridge
 * would otherwise be a way around). Docker never filters INPUT, so without these rules an internal
 * network still reaches every host service.
 *
 * With `proxy` (allowlist mode), the proxy's port on the gateway is closed to everyone, on every
 * interface (other bridges, docker0, lo): logged (`berth-proxy`) and refused with a reset. Only
 * {@link openProxyTo}, once the container's address is known, opens it to exactly that address.
 * `-I` inserts at the top, so the rules go in from the lowest up.
 */
export async function isolateBridge(bridge: string, openings: readonly HostOpening[], tag: string, proxy?: { gateway: string; port: number }, resolvers: readonly string[] = []): Promise<void> {
  const toProxy = proxy ? ['-d', proxy.gateway, '-p', 'tcp', '--dport', String(proxy.port)] : [];
  await insertRules(
    [
      ['ip6tables', ['-i', bridge, '-j', 'DROP']],
      ['iptables', ['-i', bridge, '-j', 'DROP']],
      ['iptables', ['-i', bridge, ...LOG_LIMIT, '-j', 'LOG', '--log-prefix', DROP_PREFIX.drop]],
      ...openings.map((o): [RuleTool, string[]] => ['iptables', ['-i', bridge, '-d', o.address, '-p', 'tcp', '--dport', String(o.port), '-j', 'ACCEPT']]),
      // A resolver of the host's that is one of its own addresses (a local dnsmasq) is reached through INPUT.
      ...resolvers.flatMap((r) => ['udp', 'tcp'].map((p): Rule => ['iptables', ['-i', bridge, '-d', r, '-p', p, '--dport', '53', '-j', 'ACCEPT']])),
      ['iptables', ['-i', bridge, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT']],
      ...(proxy
        ? [
            ['iptables', [...toProxy, '-j', 'REJECT', '--reject-with', 'tcp-reset']] as [RuleTool, string[]],
            ['iptables', [...toProxy, ...LOG_LIMIT, '-j', 'LOG', '--log-prefix', DROP_PREFIX.proxy]] as [RuleTool, string[]],
          ]
        : []),
    ],
    tag,
    bridge,
  );
}

/**
 * Opens the proxy port to the lease's one container: from its bridge and its address only. Goes
 * above the refusal {@link isolateBridge} put in; a container cannot forge its source address
 * (no CAP_NET_RAW), and no other container is on the lease's network.
 */
export async function openProxyTo(bridge: string, proxy: { gateway: string; port: number }, containerAddress: string, tag: string): Promise<void> {
  await insertRules([['iptables', ['-i', bridge, '-s', containerAddress, '-d', proxy.gateway, '-p', 'tcp', '--dport', String(proxy.port), '-j', 'ACCEPT']]], tag, bridge);
}

/**
 * The forwarding side of a sandbox bridge ({@link forwardingRules}): in allowlist mode everything
 * forwarded is logged and refused; in open mode what goes to `blocked` ranges (link-local, this
 * machine's LANs: see openModeBlockedRanges) or to other Docker networks is logged and dropped,
 * except the listed `openings` and the host's `resolvers` on port 53. In DOCKER-USER, which Docker
 * puts first in FORWARD and never flushes; FORWARD itself on an engine without it.
 */
export async function guardForwarding(bridge: string, tag: string, o: Parameters<typeof forwardingRules>[1]): Promise<void> {
  const chain = (await run('iptables', ['-w', '-S', 'DOCKER-USER']).then(() => true, () => false)) ? 'DOCKER-USER' : 'FORWARD';
  await insertRules(forwardingRules(bridge, o), tag, bridge, chain);
}

/**
 * Drops everything from the bridge under a tag of its own, in IPv4 and IPv6: held while a lease's
 * rules are rebuilt, so the running container never sees the host open in between.
 */
export async function holdBridge(bridge: string, tag: string): Promise<void> {
  for (const tool of TOOLS) await run(tool, ['-w', '-I', 'INPUT', '-i', bridge, '-j', 'DROP', '-m', 'comment', '--comment', tag]);
}

const TAG = /--comment "?(berth:[^\s"]+)"?/;

/** Chains Berth puts rules in: INPUT (the host), DOCKER-USER or FORWARD (open mode's blocked ranges). */
const CHAINS = ['INPUT', 'DOCKER-USER', 'FORWARD'] as const;

/**
 * Every rule of `tool` in Berth's chains, as `-S` prints it. One listing of the whole filter table
 * rather than one per chain: every `berth` start and run end sweeps, and each spawn of the tool
 * costs ~10 ms of the run's fixed time (a chain that does not exist simply has no lines).
 */
async function listRules(tool: RuleTool, strict = false): Promise<string[]> {
  const out = await run(tool, ['-w', '-S']).then((r) => r.stdout, (err: unknown) => {
    if (strict) throw err;
    return '';
  });
  return out.split('\n').filter((l) => CHAINS.some((chain) => l.startsWith(`-A ${chain} `)));
}

/** {@link listRules} of IPv4 and IPv6 side by side (two processes at once, not one after the other). */
async function listAllRules(): Promise<Array<[RuleTool, string[]]>> {
  return Promise.all(TOOLS.map(async (tool): Promise<[RuleTool, string[]]> => [tool, await listRules(tool)]));
}

/** The tags of every Berth rule now installed (IPv4 and IPv6). */
export async function listRuleTags(): Promise<string[]> {
  const tags = new Set<string>();
  for (const [, lines] of await listAllRules()) for (const line of lines) {
    const m = TAG.exec(line);
    if (m) tags.add(m[1]!);
  }
  return [...tags];
}

/** What a rule's tag says: the host and lease whose rules it is (`hold`: the one held while its rules are rebuilt). */
export function parseRuleTag(tag: string): { hostId: string; leaseId: string; hold: boolean } | undefined {
  const hold = tag.endsWith(':hold');
  const m = /^berth:(.+):([^:]+)$/.exec(hold ? tag.slice(0, -':hold'.length) : tag);
  return m ? { hostId: m[1]!, leaseId: m[2]!, hold } : undefined;
}

/** One installed Berth rule: its tool and chain, its tag, and the bridge it matches (`-i`), if any. */
export interface InstalledRule {
  tool: RuleTool;
  chain: string;
  tag: string;
  bridge: string | null;
}

/** Every Berth rule now installed (IPv4 and IPv6, Berth's chains), one entry a rule. */
export async function listBerthRules(): Promise<InstalledRule[]> {
  const out: InstalledRule[] = [];
  for (const [tool, lines] of await listAllRules()) for (const line of lines) {
    const tag = TAG.exec(line)?.[1];
    if (tag) out.push({ tool, chain: /^-A (\S+) /.exec(line)![1]!, tag, bridge: /(?:^| )-i (\S+)/.exec(line)?.[1] ?? null });
  }
  return out;
}

/**
 * Deletes every Berth rule (IPv4 and IPv6, every chain) whose tag `which` selects (among `listed`,
 * when the caller listed them); returns how many of them are gone now. Each rule's deletion stands
 * alone: one that fails does not keep the others in. A rule that is no longer installed when its
 * deletion fails (another process removed it after the listing: a concurrent gc, the lease's own
 * release) counts as done; those still installed are reported together once every other rule was
 * tried (`rule_removal_failed`, `details.removed` the count and `details.failed` each rule and why).
 */
export async function removeBridgeRules(which: (tag: string) => boolean, onRemoved?: (rule: string) => void, listed?: Array<[RuleTool, string[]]>): Promise<number> {
  let n = 0;
  const failed: Array<{ tool: RuleTool; line: string; rule: string; error: string }> = [];
  for (const [tool, lines] of listed ?? (await listAllRules())) {
    for (const line of lines) {
      const m = TAG.exec(line);
      if (!m || !which(m[1]!)) continue;
      // `-S` prints rules in `-A CHAIN` form; the same arguments after `-D CHAIN` delete exactly that rule.
      const [, chain, rest] = /^-A (\S+) (.*)$/.exec(line)!;
      const args = rest!.match(/"[^"]*"|\S+/g)!.map((a) => a.replace(/^"|"$/g, ''));
      const rule = `${tool} ${chain} ${m[1]}`;
      try {
        await run(tool, ['-w', '-D', chain!, ...args]);
      } catch (err) {
        failed.push({ tool, line, rule, error: ((err as { stderr?: string }).stderr || (err as Error).message).trim() });
        continue;
      }
      onRemoved?.(rule);
      n += 1;
    }
  }
  if (!failed.length) return n;
  // Listed again, once, rather than trusting the tool's message: a rule absent now was removed by someone else.
  // A listing that fails proves nothing gone: that tool's failed rules are all reported then.
  const tools = [...new Set(failed.map((f) => f.tool))];
  const now = new Map(await Promise.all(tools.map(async (t) => [t, await listRules(t, true).then((l) => new Set(l), () => undefined)] as const)));
  const still = failed.filter((f) => now.get(f.tool)?.has(f.line) ?? true);
  for (const f of failed) if (!still.includes(f)) (onRemoved?.(f.rule), (n += 1));
  if (!still.length) return n;
  throw new BerthError('rule_removal_failed', `could not remove ${still.length} firewall rule(s): ${still.map((f) => `${f.rule} (${f.error})`).join('; ')}`, {
    retryable: true,
    details: { removed: n, failed: still.map((f) => ({ rule: f.rule, error: f.error })) },
  });
}

/** What a sweep knows of the leases named by the objects it found: whether each is active, and whether the store records it. */
export interface LeaseView {
  isActive(leaseId: string): boolean;
  isKnown(leaseId: string): boolean;
}

/**
 * Removes what a dead process left of this host's egress: networks and INPUT rules of leases that
 * are no longer active. Networks younger than `minAgeMs` are kept with their rules (their lease may
 * still be being written); the container sweep runs first, so a removable network holds no container.
 * With `scope`, only one store's leftovers are taken: networks labelled with its id (or unlabelled
 * ones of leases it knows), and rules of leases it knows or whose network it owns. Another store
 * under the same host id keeps its own. `leasesOf` is asked about the leases the networks and
 * rules found name, and only those: a host's lease records only grow, one or more a run.
 */
export async function sweepEgress(
  docker: Dockerode,
  hostId: string,
  leasesOf: (leaseIds: string[]) => Promise<LeaseView>,
  minAgeMs = 120_000,
  scope?: { storeId: string },
): Promise<EgressSweep> {
  const nets = await docker.listNetworks({ filters: { label: [`${EGRESS_LABEL}=1`, `${LABEL.host}=${hostId}`] } });
  const prefix = `berth:${hostId}:`;
  const leaseOf = (t: string) => t.slice(prefix.length).replace(/:hold$/, '');
  const listed = await listAllRules();
  const ruleLeases = listed.flatMap(([, lines]) => lines.map((l) => TAG.exec(l)?.[1]).filter((t): t is string => t?.startsWith(prefix) === true).map(leaseOf));
  const { isActive, isKnown } = await leasesOf([...new Set([...nets.map((n) => n.Labels?.[LABEL.lease] ?? ''), ...ruleLeases])].filter(Boolean));
  let networks = 0;
  const report: EgressSweep = { networks: 0, rules: 0, removedNetworks: [], removedRules: [], keptNetworks: [] };
  const kept = new Set<string>();
  const ours = new Set<string>();
  for (const n of nets) {
    const leaseId = n.Labels?.[LABEL.lease] ?? '';
    if (scope) {
      const store = n.Labels?.[LABEL.store];
      if (store ? store !== scope.storeId : !isKnown(leaseId)) continue;
      ours.add(leaseId);
    }
    // A young network may belong to a lease being created, whose record is not written yet; one
    // whose lease the store records (and is not active) was released or expired, young or not.
    const ageMs = Date.now() - Date.parse(n.Created);
    const young = ageMs < minAgeMs && !(scope ? isKnown(leaseId) : false);
    if (isActive(leaseId) || young) {
      kept.add(leaseId);
      report.keptNetworks.push({ id: n.Id, name: n.Name, leaseId, why: isActive(leaseId) ? 'its lease is active' : `younger than ${Math.round(minAgeMs / 1000)} s and no lease record names it yet` });
      continue;
    }
    await removeSandboxNetwork(docker, n.Id).then(() => (networks += 1, report.removedNetworks.push({ id: n.Id, name: n.Name, leaseId })), () => {});
  }
  const mine = (lease: string) => !scope || isKnown(lease) || ours.has(lease);
  const rules = await removeBridgeRules((t) => t.startsWith(prefix) && mine(leaseOf(t)) && !isActive(leaseOf(t)) && !kept.has(leaseOf(t)), (r) => report.removedRules.push(r), listed);
  return { ...report, networks, rules };
}

/** What one egress sweep removed (networks, firewall rules as `tool CHAIN tag`) and which networks it kept, with why. */
export interface EgressSweep {
  networks: number;
  rules: number;
  removedNetworks: Array<{ id: string; name: string; leaseId: string }>;
  removedRules: string[];
  keptNetworks: Array<{ id: string; name: string; leaseId: string; why: string }>;
}
