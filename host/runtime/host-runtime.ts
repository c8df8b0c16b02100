import type { Logger } from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel } from '../kernel';
import { PlanSandbox, planHandlers, sandboxDocType, type PlanProgress } from '../plan';
import type { SandboxHost, SnapshotEngineCalls } from '../sandbox';
import { Snapshotter } from '../snapshot';
import type { Store } from '../store';
import type { Clock } from '../support';
import { KERNEL } from '../version';

export interface HostRuntimeDeps {
  store: Store;
  sandbox: SandboxHost;
  engine: SnapshotEngineCalls;
  clock: Clock;
  logger: Logger;
  hostId: string;
  concurrency?: number;
  onProgress?: (p: PlanProgress) => void;
}

/** The kernel with every built-in task kind and document type registered, and the plan sandbox behind them. */
export function createHostRuntime(d: HostRuntimeDeps) {
  const registry = new HandlerRegistry();
  const documents = new DocumentTypes();
  documents.register(sandboxDocType);
  const kernel = new Kernel({ store: d.store, registry, documents, clock: d.clock, logger: d.logger, hostId: d.hostId, concurrency: d.concurrency, versions: { kernel: `${KERNEL.name}@${KERNEL.version}` } });
  const snapshots = new Snapshotter({ engine: d.engine, store: d.store, logger: d.logger });
  const planSandbox = new PlanSandbox({ store: d.store, sandbox: d.sandbox, snapshots, imageExists: d.engine.imageExists, clock: d.clock, logger: d.logger });
  for (const h of planHandlers(planSandbox, (p) => d.onProgress?.(p))) registry.register(h);
  return { kernel, registry, documents, snapshots, planSandbox, store: d.store };
}

export type HostRuntime = ReturnType<typeof createHostRuntime>;
