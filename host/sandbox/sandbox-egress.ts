import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { BerthError } from '../errors';
import { LABEL } from './labels';
import type { SandboxNetworkSpec } from './sandbox-spec';
import {
  createSandboxNetwork,
  EGRESS_LABEL,
  EGRESS_PROXY_PORT,
  holdBridge,
  isolateBridge,
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
  start(p: { listenHost: string; port: number; allow: readonly string[]; allowPrivate: boolean; leaseId: string; runId: string | null; sessionId: string | null }): Promise<{ close(): Promise<void> }>;
}

/** What a container on a sandbox network is created with; no proxy in open mode. */
export interface EgressAttachment {
  networkName: string;
  proxyUrl?: string;
}

/** A network mode that gets a network of its own. */
export type NetworkedSpec = Exclude<SandboxNetworkSpec, { mode: 'none' }>;

interface Live {
  net: SandboxNetwork;
  tag: string;
  proxy: { close(): Promise<void> } | undefined;
}

const RUN_LABEL = 'berth.run';
const SESSION_LABEL = 'berth.session';

/**
 * The network side of allowlist and open sandboxes: a network, INPUT rules and (allowlist) a proxy
 * per lease, set up before the container is created and torn down after it is removed. Set up in
 * the order that never leaves the host open: rules before the container exists; teardown after it
 * is gone.
 */
export class SandboxEgress {
  private readonly live = new Map<string, Live>();

  constructor(private readonly d: { docker: Dockerode; hostId: string; logger: Logger; port: EgressPort | undefined }) {}

  async open(leaseId: string, who: { runId: string | null; sessionId: string | null; storeId?: string }, spec: NetworkedSpec): Promise<EgressAttachment> {
    const port = this.proxyPort(spec, leaseId);
    const net = await createSandboxNetwork(this.d.docker, { hostId: this.d.hostId, leaseId, ...who }, { internal: spec.mode === 'allowlist' });
    const entry: Live = { net, tag: ruleTag(this.d.hostId, leaseId), proxy: undefined };
    this.live.set(leaseId, entry);
    try {
      await this.guard(entry, spec, leaseId, { runId: who.runId, sessionId: who.sessionId }, port);
    } catch (err) {
      await this.close(leaseId);
      throw err;
    }
    return { networkName: net.name, ...(spec.mode === 'allowlist' ? { proxyUrl: `http://${net.gateway}:${EGRESS_PROXY_PORT}` } : {}) };
  }

  /** After a restart: the network and rules outlived the process, the proxy did not; put both back as the spec says. */
  async resume(leaseId: string, spec: NetworkedSpec): Promise<void> {
    if (this.live.get(leaseId)) return;
    const port = this.proxyPort(spec, leaseId);
    const [info] = await this.d.docker.listNetworks({ filters: { label: [`${EGRESS_LABEL}=1`, `${LABEL.lease}=${leaseId}`] } });
    if (!info) return;
    const cfg = info.IPAM?.Config?.[0];
    const net: SandboxNetwork = { id: info.Id, name: info.Name, bridge: `br-${info.Id.slice(0, 12)}`, gateway: (cfg?.Gateway ?? '').split('/')[0]!, subnet: cfg?.Subnet ?? '' };
    const entry: Live = { net, tag: ruleTag(this.d.hostId, leaseId), proxy: undefined };
    this.live.set(leaseId, entry);
    // Rules are rebuilt rather than trusted: the spec, not what an older process left, says what is
    // open. A DROP of its own holds the bridge closed meanwhile (the container is running).
    const hold = `${entry.tag}:hold`;
    // If the rebuild fails the hold stays (closed beats open); the lease's release or the sweeper removes it.
    await holdBridge(net.bridge, hold);
    await removeBridgeRules((t) => t === entry.tag);
    await this.guard(entry, spec, leaseId, { runId: info.Labels?.[RUN_LABEL] || null, sessionId: info.Labels?.[SESSION_LABEL] || null }, port);
    await removeBridgeRules((t) => t === hold);
  }

  /**
   * The process is going away but its leases live on (an agent session's sandbox waits for the
   * next `berth chat`): stop the proxies and keep networks and rules, so the sandbox stays closed;
   * the next process's `attach` starts the proxy again.
   */
  async detachAll(): Promise<void> {
    const entries = [...this.live.entries()];
    this.live.clear();
    await Promise.all(entries.map(([leaseId, e]) => e.proxy?.close().catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'egress proxy close failed'))));
  }

  /** Stops the proxy, removes the rules and the network. The container must already be removed. */
  async close(leaseId: string): Promise<void> {
    const entry = this.live.get(leaseId);
    this.live.delete(leaseId);
    const tag = ruleTag(this.d.hostId, leaseId);
    await entry?.proxy?.close().catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'egress proxy close failed'));
    await removeBridgeRules((t) => t === tag || t === `${tag}:hold`).catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'could not remove INPUT rules; the sweeper will'));
    const netId = entry?.net.id ?? `berth-net-${leaseId}`;
    await removeSandboxNetwork(this.d.docker, netId).catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'could not remove sandbox network; the sweeper will'));
  }

  private async guard(entry: Live, spec: NetworkedSpec, leaseId: string, who: { runId: string | null; sessionId: string | null }, port: EgressPort | undefined): Promise<void> {
    const openings: HostOpening[] = spec.mode === 'allowlist' ? [{ address: entry.net.gateway, port: EGRESS_PROXY_PORT }] : spec.hostOpenings;
    await isolateBridge(entry.net.bridge, openings, entry.tag);
    if (spec.mode === 'allowlist') {
      entry.proxy = await port!.start({ listenHost: entry.net.gateway, port: EGRESS_PROXY_PORT, allow: spec.allow, allowPrivate: spec.allowPrivate, leaseId, ...who });
    } else {
      this.d.logger.warn({ leaseId, ...who, event: 'egress-open', hostOpenings: spec.hostOpenings }, 'sandbox network is open: outside hosts are reachable and not audited');
    }
  }

  private proxyPort(spec: NetworkedSpec, leaseId: string): EgressPort | undefined {
    if (spec.mode === 'allowlist' && !this.d.port) {
      throw new BerthError('egress_unavailable', 'network.mode allowlist needs the host egress proxy, which this host was built without', { ids: { leaseId } });
    }
    return this.d.port;
  }
}
