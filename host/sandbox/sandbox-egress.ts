import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { LABEL } from './labels';
import { createSandboxNetwork, EGRESS_LABEL, EGRESS_PROXY_PORT, isolateBridge, removeBridgeRules, removeSandboxNetwork, ruleTag, type SandboxNetwork } from './sandbox-network';

/** Starts the host's egress proxy for one sandbox; the CLI wires the real proxy and audit store. */
export interface EgressPort {
  start(p: { listenHost: string; port: number; allow: readonly string[]; allowPrivate: boolean; leaseId: string; runId: string | null }): Promise<{ close(): Promise<void> }>;
}

/** What a container on an egress network is created with. */
export interface EgressAttachment {
  networkName: string;
  proxyUrl: string;
}

interface Live {
  net: SandboxNetwork;
  tag: string;
  proxy: { close(): Promise<void> } | undefined;
}

const RUN_LABEL = 'berth.run';

/**
 * The egress side of allowlist sandboxes: a network, INPUT rules and a proxy per lease, set up
 * before the container is created and torn down after it is removed. Set up in the order that
 * never leaves the host open: rules before the container exists; teardown after it is gone.
 */
export class SandboxEgress {
  private readonly live = new Map<string, Live>();

  constructor(private readonly d: { docker: Dockerode; hostId: string; logger: Logger; port: EgressPort }) {}

  async open(leaseId: string, runId: string | null, policy: { allow: readonly string[]; allowPrivate: boolean }): Promise<EgressAttachment> {
    const net = await createSandboxNetwork(this.d.docker, { hostId: this.d.hostId, leaseId, runId });
    const entry: Live = { net, tag: ruleTag(this.d.hostId, leaseId), proxy: undefined };
    this.live.set(leaseId, entry);
    try {
      await isolateBridge(net.bridge, EGRESS_PROXY_PORT, entry.tag);
      entry.proxy = await this.d.port.start({ listenHost: net.gateway, port: EGRESS_PROXY_PORT, ...policy, leaseId, runId });
    } catch (err) {
      await this.close(leaseId);
      throw err;
    }
    return { networkName: net.name, proxyUrl: `http://${net.gateway}:${EGRESS_PROXY_PORT}` };
  }

  /** After a restart: the network and rules outlived the process, the proxy did not; start it again. */
  async resume(leaseId: string, policy: { allow: readonly string[]; allowPrivate: boolean }): Promise<void> {
    if (this.live.get(leaseId)?.proxy) return;
    const [info] = await this.d.docker.listNetworks({ filters: { label: [`${EGRESS_LABEL}=1`, `${LABEL.lease}=${leaseId}`] } });
    if (!info) return;
    const cfg = info.IPAM?.Config?.[0];
    const net: SandboxNetwork = { id: info.Id, name: info.Name, bridge: `br-${info.Id.slice(0, 12)}`, gateway: (cfg?.Gateway ?? '').split('/')[0]!, subnet: cfg?.Subnet ?? '' };
    const runId = info.Labels?.[RUN_LABEL] || null;
    const entry: Live = { net, tag: ruleTag(this.d.hostId, leaseId), proxy: undefined };
    this.live.set(leaseId, entry);
    await removeBridgeRules((t) => t === entry.tag);
    await isolateBridge(net.bridge, EGRESS_PROXY_PORT, entry.tag);
    entry.proxy = await this.d.port.start({ listenHost: net.gateway, port: EGRESS_PROXY_PORT, ...policy, leaseId, runId });
  }

  /** Stops the proxy, removes the rules and the network. The container must already be removed. */
  async close(leaseId: string): Promise<void> {
    const entry = this.live.get(leaseId);
    this.live.delete(leaseId);
    const tag = ruleTag(this.d.hostId, leaseId);
    await entry?.proxy?.close().catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'egress proxy close failed'));
    await removeBridgeRules((t) => t === tag).catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'could not remove INPUT rules; the sweeper will'));
    const netId = entry?.net.id ?? `berth-net-${leaseId}`;
    await removeSandboxNetwork(this.d.docker, netId).catch((err: unknown) => this.d.logger.warn({ err, leaseId }, 'could not remove sandbox network; the sweeper will'));
  }
}
