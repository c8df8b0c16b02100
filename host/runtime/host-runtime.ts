import type { Logger } from 'pino';
import type { ArtifactStore } from '../artifacts';
import { registerAgent, type AgentLiveEvent } from '../agent';
import type { Extension } from '../agent/custom-tasks';
import { DocumentTypes, HandlerRegistry, Kernel, type KernelOptions, type SessionOwnershipOptions } from '../kernel';
import { planHandlers, type PlanProgress } from '../plan';
import { RunSandbox, sandboxDocType } from '../run-sandbox';
import type { SandboxHost, SnapshotEngineCalls } from '../sandbox';
import { Snapshotter, SnapshotTransport, type RegistryCalls } from '../snapshot';
import type { Store } from '../store';
import type { Clock } from '../support';
import { KERNEL } from '../version';
import { releaseLeasesOnRunEnd } from './run-end-leases';
import { pruneWhileRunning } from './in-run-retention';
import { boundHeapWhileRunning } from './heap-while-running';

export interface HostRuntimeDeps {
  store: Store;
  sandbox: SandboxHost;
  engine: SnapshotEngineCalls;
  clock: Clock;
  logger: Logger;
  hostId: string;
  concurrency?: number;
  onProgress?: (p: PlanProgress) => void;
  /** Streamed model text and command output of agent runs (live display only). */
  onAgentLive?: (e: AgentLiveEvent) => void;
  /** Application task kinds and document types (see host/agent/custom-tasks.ts). */
  extensions?: Extension[];
  /** Registry calls of the engine (`registryEngine(docker)`): snapshots travel when a registry is configured. */
  registry?: RegistryCalls;
  /** The host setting `BERTH_REGISTRY`; a manifest's `snapshot.registry` wins. */
  hostRegistry?: string;
  /** Where plan steps keep their artifacts (the CLI builds it; without one, a step declaring artifacts fails saying so). */
  artifacts?: ArtifactStore;
  /** The lease of the kernel's session claims (default 30 s). */
  ownership?: SessionOwnershipOptions;
  /** Which sessions the kernel claims by itself (KernelOptions.claim; default `all`). */
  claim?: KernelOptions['claim'];
  /** How often the kernel renews its sessions' leases (default a third of the TTL). */
  heartbeatMs?: number;
}

/** The kernel with every built-in task kind and document type registered, and the plan sandbox behind them. */
export function createHostRuntime(d: HostRuntimeDeps) {
  const registry = new HandlerRegistry();
  const documents = new DocumentTypes();
  documents.register(sandboxDocType);
  const snapshots = new Snapshotter({ engine: d.engine, store: d.store, logger: d.logger });
  const discardSnapshots = async (ids: string[]) => void (await Promise.all(ids.map((id) => snapshots.discard(id))));
  const kernel = new Kernel({ store: d.store, registry, documents, clock: d.clock, logger: d.logger, hostId: d.hostId, concurrency: d.concurrency, versions: { kernel: `${KERNEL.name}@${KERNEL.version}` }, ownership: d.ownership, claim: d.claim, heartbeatMs: d.heartbeatMs, discardSnapshots });
  const transport = d.registry ? new SnapshotTransport({ registry: d.registry, store: d.store, logger: d.logger, hostRegistry: d.hostRegistry }) : undefined;
  const planSandbox = new RunSandbox({ store: d.store, sandbox: d.sandbox, snapshots, clock: d.clock, logger: d.logger, transport });
  for (const h of planHandlers(planSandbox, (p) => d.onProgress?.(p), d.artifacts)) registry.register(h);
  const agent = registerAgent({ registry, documents, kernel, store: d.store, sandbox: d.sandbox, snapshots, clock: d.clock, logger: d.logger, transport, onLive: (e) => d.onAgentLive?.(e) });
  for (const x of d.extensions ?? []) x.register({ registry, documents });
  // A session this kernel lost is no longer this host's: its held sandboxes are forgotten (not removed).
  kernel.onSessionLost((l) => planSandbox.forgetSession(l.sessionId));
  // A run that reaches a final state gives up every sandbox leased for it (see run-end-leases.ts).
  const runEnd = releaseLeasesOnRunEnd(kernel, { store: d.store, sandbox: d.sandbox, logger: d.logger });
  // A running plan run's older snapshots are pruned in batches as it goes (in-run-retention.ts).
  const retention = pruneWhileRunning(kernel, { store: d.store, documents, engine: d.engine, images: snapshots.images, clock: d.clock, logger: d.logger });
  // The heap stays near its live data however long the run (heap-while-running.ts); BERTH_HEAP_SLACK_MB=0 turns it off.
  const slack = Number(process.env.BERTH_HEAP_SLACK_MB ?? 16);
  if (slack > 0) boundHeapWhileRunning(kernel, slack);
  return { kernel, registry, documents, snapshots, planSandbox, agent, store: d.store, leasesReleased: runEnd.settled, retentionSettled: retention.settled };
}

export type HostRuntime = ReturnType<typeof createHostRuntime>;
