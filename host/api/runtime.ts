import { userInfo } from 'node:os';
import type { AgentLiveEvent } from '../agent';
import type { Extension } from '../agent/custom-tasks';
import { BerthError } from '../errors';
import type { PlanProgress } from '../plan';
import { createHostRuntime, type HostRuntime } from '../runtime/host-runtime';
import { registryEngine, snapshotEngine } from '../sandbox';
import type { HostParts } from './assemble';

/** Default claim lifetime without a renewal; `--lease-ttl S` or `BERTH_LEASE_TTL_MS` change it (tests use short ones). */
export const DEFAULT_LEASE_TTL_MS = 30_000;

/** The run-ownership lease TTL in ms: `flag` seconds, else `BERTH_LEASE_TTL_MS`, else 30 s. */
export function leaseTtlMs(flag: string | undefined): number {
  if (flag !== undefined) {
    const s = Number(flag);
    if (!Number.isFinite(s) || s <= 0) throw new BerthError('usage', `--lease-ttl expects seconds (> 0), found "${flag}"`);
    return Math.round(s * 1000);
  }
  const env = process.env.BERTH_LEASE_TTL_MS;
  if (env !== undefined) {
    const ms = Number(env);
    if (!Number.isInteger(ms) || ms <= 0) throw new BerthError('usage', `BERTH_LEASE_TTL_MS expects whole milliseconds (> 0), found "${env}"`);
    return ms;
  }
  return DEFAULT_LEASE_TTL_MS;
}

/** How often a kernel renews its sessions' leases for a TTL. */
export const heartbeatEvery = (ttlMs: number) => Math.max(50, Math.floor(ttlMs / 3));

/** The actor of an operator's decision: `user:$BERTH_OPERATOR`, else the login name. */
export const operator = () => `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;

/** The parts a runtime is built from: the host's, plus the application task kinds it carries. */
export type RuntimeParts = HostParts & { extensions?: Extension[] };

export interface RuntimeOptions {
  /** Which sessions the kernel claims by itself (KernelOptions.claim): `own` for a driving host, `none` for a worker or a detached submit. */
  claim: 'own' | 'none';
  /** The session lease; default `BERTH_LEASE_TTL_MS` or 30 s. */
  ttlMs?: number;
  concurrency?: number;
  onProgress?: (p: PlanProgress) => void;
  onAgentLive?: (e: AgentLiveEvent) => void;
}

/**
 * The one runtime every path that drives runs uses (`run`, `resume`, `--take-over`, `reconcile`,
 * `fork`, `agent`, `chat`, `worker`, detached submits, the web view's actions, a program through
 * {@link Berth}): the same kernel, the same registry transport for snapshots, the same artifact
 * store and extensions, so a run behaves alike whichever command or host carries it on.
 */
export function hostRuntime(p: RuntimeParts, o: RuntimeOptions): HostRuntime {
  return createHostRuntime({
    store: p.store,
    sandbox: p.sandbox,
    engine: snapshotEngine(p.docker),
    registry: registryEngine(p.docker),
    hostRegistry: p.registry,
    artifacts: p.artifacts,
    extensions: p.extensions,
    clock: p.clock,
    logger: p.logger,
    hostId: p.hostId,
    concurrency: o.concurrency,
    ownership: { leaseTtlMs: o.ttlMs ?? leaseTtlMs(undefined) },
    claim: o.claim,
    onProgress: o.onProgress,
    onAgentLive: o.onAgentLive,
  });
}
