import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';
import { BerthError } from '../errors';
import { engineError, isNotFound } from './engine-errors';
import { LABEL } from './labels';

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
 * Creates the internal network of one lease. `--internal` stops forwarding to the outside; the
 * host itself stays reachable through the gateway, which {@link isolateBridge} closes.
 */
export async function createSandboxNetwork(docker: Dockerode, who: { hostId: string; leaseId: string; runId?: string | null }): Promise<SandboxNetwork> {
  const name = `berth-net-${who.leaseId}`;
  try {
    const created = await docker.createNetwork({
      Name: name,
      Driver: 'bridge',
      Internal: true,
      CheckDuplicate: true,
      Labels: { [LABEL.managed]: '1', [LABEL.host]: who.hostId, [LABEL.lease]: who.leaseId, [EGRESS_LABEL]: '1', 'berth.run': who.runId ?? '' },
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

/**
 * Closes the host to the sandbox: from the bridge, only replies to connections the host opened and
 * new connections to the proxy port are accepted; everything else is dropped. Docker never filters
 * INPUT, so without these rules an internal network still reaches every host service.
 * `-I` inserts at the top, so the DROP goes in first and the ACCEPTs above it.
 */
export async function isolateBridge(bridge: string, proxyPort: number, tag: string): Promise<void> {
  const rules: string[][] = [
    ['-i', bridge, '-j', 'DROP'],
    ['-i', bridge, '-p', 'tcp', '--dport', String(proxyPort), '-j', 'ACCEPT'],
    ['-i', bridge, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
  ];
  try {
    for (const r of rules) await run('iptables', ['-w', '-I', 'INPUT', ...r, '-m', 'comment', '--comment', tag]);
  } catch (err) {
    await removeBridgeRules((t) => t === tag).catch(() => {});
    throw new BerthError('network_setup_failed', `could not add INPUT rules for ${bridge}: ${(err as Error).message}`, { cause: err });
  }
}

/** The tags of every Berth INPUT rule now installed. */
export async function listRuleTags(): Promise<string[]> {
  const { stdout } = await run('iptables', ['-w', '-S', 'INPUT']);
  return [...new Set([...stdout.matchAll(/--comment "?(berth:[^\s"]+)"?/g)].map((m) => m[1]!))];
}

/** Deletes every INPUT rule whose tag `which` selects; returns how many it deleted. */
export async function removeBridgeRules(which: (tag: string) => boolean): Promise<number> {
  const { stdout } = await run('iptables', ['-w', '-S', 'INPUT']);
  let n = 0;
  for (const line of stdout.split('\n')) {
    const m = /--comment "?(berth:[^\s"]+)"?/.exec(line);
    if (!m || !which(m[1]!) || !line.startsWith('-A INPUT ')) continue;
    // `-S` prints rules in `-A` form; the same arguments after `-D` delete exactly that rule.
    const args = line.slice('-A INPUT '.length).match(/"[^"]*"|\S+/g)!.map((a) => a.replace(/^"|"$/g, ''));
    await run('iptables', ['-w', '-D', 'INPUT', ...args]);
    n += 1;
  }
  return n;
}

/**
 * Removes what a dead process left of this host's egress: networks and INPUT rules of leases that
 * are no longer active. Networks younger than `minAgeMs` are kept with their rules (their lease may
 * still be being written); the container sweep runs first, so a removable network holds no container.
 */
export async function sweepEgress(docker: Dockerode, hostId: string, isActive: (leaseId: string) => boolean, minAgeMs = 120_000): Promise<{ networks: number; rules: number }> {
  const nets = await docker.listNetworks({ filters: { label: [`${EGRESS_LABEL}=1`, `${LABEL.host}=${hostId}`] } });
  let networks = 0;
  const kept = new Set<string>();
  for (const n of nets) {
    const leaseId = n.Labels?.[LABEL.lease] ?? '';
    // A young network may belong to a lease being created, whose record is not written yet.
    const young = Date.now() - Date.parse(n.Created) < minAgeMs;
    if (isActive(leaseId) || young) {
      kept.add(leaseId);
      continue;
    }
    await removeSandboxNetwork(docker, n.Id).then(() => (networks += 1)).catch(() => {});
  }
  const prefix = `berth:${hostId}:`;
  const rules = await removeBridgeRules((t) => t.startsWith(prefix) && !isActive(t.slice(prefix.length)) && !kept.has(t.slice(prefix.length)));
  return { networks, rules };
}
