import type { networkInterfaces } from 'node:os';
import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { blockedRangeOf, openModeBlockedRanges, type BlockedRange } from '../../environment';
import { BerthError } from '../errors';
import { faultAside } from '../support/faults';
import { DropAudit, type DroppedAttempt } from './drop-audit';
import { followDropLog, type DropLine } from './drop-log';
import { hostResolvers } from './forward-rules';
import { LABEL } from './labels';
import type { SandboxGatewaySpec, SandboxNetworkSpec } from './sandbox-spec';
import {
  createSandboxNetwork,
  EGRESS_LABEL,
  EGRESS_PROXY_PORT,
  guardForwarding,
  holdBridge,
  isolateBridge,
  openProxyTo,
  removeBridgeRules,
  removeSandboxNetwork,
  ruleTag,
  type HostOpening,
  type SandboxNetwork,
} from './sandbox-network';

/** Starts the host's egress proxy for one sandbox; the CLI wires the real proxy and audit store. */
export interface EgressPort {
  /**
   * `runId` is the run the lease was made for, when one was; a session's sandbox (agent runs) serves
   * one run after another, so attempts are attributed to the session's run at the time.
   */
  start(p: {
    listenHost: string;
    port: number;
    allow: readonly string[];
    overrides: readonly string[];
    peer: string;
    leaseId: string;
    runId: string | null;
    sessionId: string | null;
    /** The manifest's model gateway, served on the same address and port. */
    gateway?: SandboxGatewaySpec;
  }): Promise<{ close(): Promise<void> }>;
  /** Records packets the sandbox's rules refused (see drop-audit.ts); resolves once they are stored. */
  dropped(p: { leaseId: string; runId: string | null; sessionId: string | null; attempts: DroppedAttempt[] }): Promise<void>;
}

/** What a container on a sandbox network is created with; no proxy in open mode. */
export interface EgressAttachment {
  networkName: string;
  proxyUrl?: string;
  /** The model gateway's OpenAI-compatible base URL (ending in `/v1`), when the manifest has one. */
  gatewayUrl?: string;
}

/** A network mode that gets a network of its own. */
export type NetworkedSpec = Exclude<SandboxNetworkSpec, { mode: 'none' }>;

interface Live {
  net: SandboxNetwork;
  mode: NetworkedSpec['mode'];
  tag: string;
  who: { runId: string | null; sessionId: string | null };
  proxy: { close(): Promise<void> } | undefined;
  /** The container's address on the network, once it runs: the one peer its proxy serves. */
  address: string | undefined;
  /** What open mode refused to forward to when this lease's rules were written. */
  blocked: readonly BlockedRange[];
}

const RUN_LABEL = 'berth.run';
const SESSION_LABEL = 'berth.session';

/**
 * The network side of allowlist and open sandboxes: a network, INPUT rules and (allowlist) a proxy
 * per lease, set up before the container is created and torn down after it is removed. Set up in
 * the order that never leaves the host open: rules before the container exists (the proxy port
 * closed even to it), then, once it runs and has an address, the proxy and the one rule that lets
 * exactly that address reach it; teardown after it is gone. Packets the rules refuse are read back
 * from the kernel log and recorded on the lease's run.
 */
export class SandboxEgress {
  private readonly live = new Map<string, Live>();
  private readonly audit: DropAudit;
  private follower: Promise<{ stop(): Promise<void>; poll(): Promise<void> } | undefined> | undefined;
  private readonly writes = new Set<Promise<void>>();

  constructor(private readonly d: { docker: Dockerode; hostId: string; logger: Logger; port: EgressPort | undefined; now?: () => number; interfaces?: () => ReturnType<typeof networkInterfaces> }) {
    this.audit = new DropAudit({ now: d.now ?? Date.now, flush: (leaseId, attempts) => this.record(leaseId, attempts) });
  }

  /**
   * `who.origin`: the store labels (see storeLabels) the network carries, so that `berth gc --orphans`
   * can judge a store from its network alone (a host killed before its container existed).
   */
  async open(leaseId: string, who: { runId: string | null; sessionId: string | null; storeId?: string; origin?: Record<string, string> }, spec: NetworkedSpec): Promise<EgressAttachment> {
    this.proxyPort(spec, leaseId);
    this.follow();
    const net = await createSandboxNetwork(this.d.docker, { hostId: this.d.hostId, leaseId, ...who }, { internal: spec.mode === 'allowlist' });
    const entry: Live = { net, mode: spec.mode, tag: ruleTag(this.d.hostId, leaseId), who: { runId: who.runId, sessionId: who.sessionId }, proxy: undefined, address: undefined, blocked: [] };
    this.live.set(leaseId, entry);
    try {
      await this.guard(entry, spec, leaseId);
    } catch (err) {
      await this.close(leaseId);
      throw err;
    }
    // Network and rules in place, no container yet: what a host killed here leaves is only these.
    faultAside('sandbox:egress-open');
    if (spec.mode !== 'allowlist') return { networkName: net.name };
    const proxyUrl = `http://${net.gateway}:${EGRESS_PROXY_PORT}`;
    return { networkName: net.name, proxyUrl, ...(spec.gateway ? { gatewayUrl: `${proxyUrl}/v1` } : {}) };
  }

  /**
   * The container runs and has its address: start the proxy for exactly that peer and open the
   * port to it. Until this, the proxy port refuses even the sandbox (it runs no command yet).
   */
  async bind(leaseId: string, containerId: string, spec: NetworkedSpec): Promise<void> {
    const entry = this.live.get(leaseId);
    if (!entry) return;
    const info = await this.d.docker.getContainer(containerId).inspect();
    const address = info.NetworkSettings.Networks?.[entry.net.name]?.IPAddress;
    if (!address) throw new BerthError('network_setup_failed', `container ${containerId} has no address on ${entry.net.name}`, { ids: { leaseId, containerId } });
    entry.address = address;
    if (spec.mode !== 'allowlist') return;
    const proxy = { gateway: entry.net.gateway, port: EGRESS_PROXY_PORT };
    entry.proxy = await this.proxyPort(spec, leaseId)!.start({ listenHost: proxy.gateway, port: proxy.port, allow: spec.allow, overrides: spec.overrides, peer: address, leaseId, ...entry.who, ...(spec.gateway ? { gateway: spec.gateway } : {}) });
    await openProxyTo(entry.net.bridge, proxy, address, entry.tag);
  }

  /** After a restart: the network and rules outlived the process, the proxy did not; put both back as the spec says. */
  async resume(leaseId: string, spec: NetworkedSpec, containerId: string): Promise<void> {
    if (this.live.get(leaseId)) return;
    this.proxyPort(spec, leaseId);
    this.follow();
    const [info] = await this.d.docker.listNetworks({ filters: { label: [`${EGRESS_LABEL}=1`, `${LABEL.lease}=${leaseId}`] } });
    if (!info) return;
    const cfg = info.IPAM?.Config?.[0];
    const net: SandboxNetwork = { id: info.Id, name: info.Name, bridge: `br-${info.Id.slice(0, 12)}`, gateway: (cfg?.Gateway ?? '').split('/')[0]!, subnet: cfg?.Subnet ?? '' };
    const who = { runId: info.Labels?.[RUN_LABEL] || null, sessionId: info.Labels?.[SESSION_LABEL] || null };
    const entry: Live = { net, mode: spec.mode, tag: ruleTag(this.d.hostId, leaseId), who, proxy: undefined, address: undefined, blocked: [] };
    this.live.set(leaseId, entry);
    // Rules are rebuilt rather than trusted: the spec, not what an older process left, says what is
    // open. A DROP of its own holds the bridge closed meanwhile (the container is running).
    const hold = `${entry.tag}:hold`;
    // If the rebuild fails the hold stays (closed beats open); the lease's release or the sweeper removes it.
    await holdBridge(net.bridge, hold);
    await removeBridgeRules((t) => t === entry.tag);
    await this.guard(entry, spec, leaseId);
    await this.bind(leaseId, containerId, spec);
    await removeBridgeRules((t) => t === hold);
  }

  /**
   * The process is going away but its leases live on (an agent session's sandbox waits for the
   * next `berth chat`): stop the proxies and keep networks and rules, so the sandbox stays closed;
   * the next process's `attach` starts the proxy again.
   */
  async detachAll(): Promise<void> {
    await this.settle();
    const entries = [...this.live.entries()];
    this.live.clear();
    await Promise.all(entries.map(([leaseId, e]) => e.proxy?.close().catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'egress proxy close failed'))));
    const follower = await this.follower;
    this.follower = undefined;
    await follower?.stop();
  }

  /** Stops the proxy, removes the rules and the network. The container must already be removed. */
  async close(leaseId: string): Promise<void> {
    await this.settle();
    const entry = this.live.get(leaseId);
    this.live.delete(leaseId);
    const tag = ruleTag(this.d.hostId, leaseId);
    await entry?.proxy?.close().catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'egress proxy close failed'));
    await removeBridgeRules((t) => t === tag || t === `${tag}:hold`).catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'could not remove INPUT rules; the sweeper will'));
    const netId = entry?.net.id ?? `berth-net-${leaseId}`;
    await removeSandboxNetwork(this.d.docker, netId).catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'could not remove sandbox network; the sweeper will'));
  }

  /** Reads what the kernel logged so far and stores what it counted: called before anything closes. */
  private async settle(): Promise<void> {
    await (await this.follower)?.poll();
    this.audit.flush();
    await Promise.all(this.writes);
  }

  private async guard(entry: Live, spec: NetworkedSpec, leaseId: string): Promise<void> {
    if (spec.mode === 'allowlist') {
      await isolateBridge(entry.net.bridge, [], entry.tag, { gateway: entry.net.gateway, port: EGRESS_PROXY_PORT });
      await guardForwarding(entry.net.bridge, entry.tag, { mode: 'allowlist' });
    } else {
      // Read per lease: a DHCP client may rewrite resolv.conf while the host runs.
      const resolvers = hostResolvers();
      // Read per lease too: a long-lived worker sees a VPN or a second engine's bridge come up.
      entry.blocked = openModeBlockedRanges(this.d.interfaces?.());
      await isolateBridge(entry.net.bridge, spec.hostOpenings, entry.tag, undefined, resolvers);
      await guardForwarding(entry.net.bridge, entry.tag, { mode: 'open', blocked: entry.blocked, openings: spec.hostOpenings, resolvers });
      this.d.logger.warn({ leaseId, ...entry.who, event: 'egress-open', hostOpenings: spec.hostOpenings }, 'sandbox network is open: outside hosts are reachable and not audited');
    }
  }

  /** Starts following the kernel log once, for every lease of this process. */
  private follow(): void {
    this.follower ??= followDropLog((l) => this.onDrop(l)).then((f) => {
      if (!f) this.d.logger.warn({ event: 'egress-drop-log' }, 'cannot read /dev/kmsg: packets the sandbox rules drop are not recorded');
      return f;
    });
  }

  private onDrop(l: DropLine): void {
    for (const [leaseId, e] of this.live) {
      if (l.kind === 'proxy' && l.dst === e.net.gateway) {
        const reason = `connection to the egress proxy from ${l.src} (${l.in}) refused: only this sandbox's container${e.address ? ` (${e.address})` : ''} may use it`;
        return this.audit.add(leaseId, l, reason);
      }
      if (l.kind === 'drop' && l.in === e.net.bridge) return this.audit.add(leaseId, l, dropReason(l, e.mode, e.blocked));
    }
  }

  private record(leaseId: string, attempts: DroppedAttempt[]): void {
    const e = this.live.get(leaseId);
    if (!e || !this.d.port) return;
    const w = this.d.port.dropped({ leaseId, ...e.who, attempts }).catch((err: unknown) => this.d.logger.error({ err, leaseId }, 'could not record dropped packets'));
    this.writes.add(w);
    void w.finally(() => this.writes.delete(w));
  }

  private proxyPort(spec: NetworkedSpec, leaseId: string): EgressPort | undefined {
    if (spec.mode === 'allowlist' && !this.d.port) {
      throw new BerthError('egress_unavailable', 'network.mode allowlist needs the host egress proxy, which this host was built without', { ids: { leaseId } });
    }
    return this.d.port;
  }
}

/** Why the sandbox's own rules refused a packet, as the run records it. */
export function dropReason(l: Pick<DropLine, 'proto' | 'dst' | 'out'>, mode: NetworkedSpec['mode'], blocked: readonly BlockedRange[]): string {
  // A packet to a host address came through INPUT (no OUT=); one with OUT= was being forwarded.
  if (!l.out) return `direct ${l.proto} from the sandbox dropped by its network rules`;
  if (mode === 'allowlist') return `direct ${l.proto} out of the allowlist sandbox refused: its only way out is the egress proxy`;
  if (/^(docker|br-)/.test(l.out)) return `direct ${l.proto} from the sandbox to another Docker network (${l.out}) dropped: open mode reaches no other container`;
  const range = blockedRangeOf(l.dst, blocked);
  if (range) return `direct ${l.proto} from the sandbox to ${range.cidr} (${range.why}) dropped: open mode does not reach it`;
  return `direct ${l.proto} from the sandbox dropped by its network rules`;
}
