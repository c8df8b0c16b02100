import type { AgentLiveEvent } from '../agent';
import type { PlanProgress } from '../plan';
import { createHostRuntime, type HostRuntime } from '../runtime/host-runtime';
import { registryEngine, snapshotEngine } from '../sandbox';
import type { CliContext } from './context';
import { leaseTtlMs } from './commands/worker';

export interface CliRuntimeOptions {
  /** Which sessions the kernel claims by itself (KernelOptions.claim): `own` for a driving command, `none` for a worker or a detached submit. */
  claim: 'own' | 'none';
  /** The session lease; default `BERTH_LEASE_TTL_MS` or 30 s. */
  ttlMs?: number;
  concurrency?: number;
  onProgress?: (p: PlanProgress) => void;
  onAgentLive?: (e: AgentLiveEvent) => void;
}

/**
 * The one runtime every CLI command drives runs with (`run`, `resume`, `reconcile`, `fork`,
 * `agent`, `chat`, `worker`, detached submits, the web view's actions): the same kernel, the same
 * registry transport for snapshots and the same artifact store, so a run behaves alike whichever
 * command or host carries it on.
 */
export function cliRuntime(ctx: CliContext, o: CliRuntimeOptions): HostRuntime {
  return createHostRuntime({
    store: ctx.store,
    sandbox: ctx.sandbox,
    engine: snapshotEngine(ctx.docker),
    registry: registryEngine(ctx.docker),
    hostRegistry: process.env.BERTH_REGISTRY,
    artifacts: ctx.artifacts,
    clock: ctx.clock,
    logger: ctx.logger,
    hostId: ctx.hostId,
    concurrency: o.concurrency,
    ownership: { leaseTtlMs: o.ttlMs ?? leaseTtlMs(undefined) },
    claim: o.claim,
    onProgress: o.onProgress,
    onAgentLive: o.onAgentLive,
  });
}
