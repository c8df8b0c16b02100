import type { Logger } from 'pino';
import { forkPointsInUse } from '../fork';
import type { DocumentTypes, Kernel } from '../kernel';
import type { Json } from '../model';
import { sandboxDocId } from '../run-sandbox';
import type { SnapshotEngineCalls } from '../sandbox';
import { pruneRunning, type DeltaImages } from '../snapshot';
import type { Store } from '../store';
import type { Clock } from '../support';

export interface InRunRetentionDeps {
  store: Store;
  documents: DocumentTypes;
  engine: Pick<SnapshotEngineCalls, 'removeSnapshot'>;
  images: Pick<DeltaImages, 'materialize'>;
  clock: Clock;
  logger: Logger;
  /** Commits of a session between two passes (default 48: about 16 plan steps). */
  every?: number;
}

/** How many sessions' counters (and runs' settings) are kept; older ones start again from zero. */
const KEPT = 256;
const PLAN_KIND = 'plan';

/**
 * Retention of a running plan run's older snapshots in batches while it goes (issue 32 item 2),
 * so that the run's end has only the last few to prune and the engine never holds thousands of a
 * run's snapshot tags (the engine rewrites its whole tag store at every tag). Each session's
 * commits are counted; every `every` of them one background pass (host/snapshot
 * running-retention.ts) prunes what the environment's `snapshot.keepLast` lets go among the newest
 * snapshots, never the run's restore point (its sandbox pointer's snapshot) or a fork point in use.
 * Passes run one at a time; `settled()` waits for the one running (the store must outlive it).
 */
export function pruneWhileRunning(kernel: Pick<Kernel, 'onCommit'>, d: InRunRetentionDeps): { settled(): Promise<void> } {
  const every = d.every ?? 48;
  const counts = new Map<string, number>();
  /** Run id -> its `keepLast`, or null for a run that is not a plan run or has no setting. */
  const keepLastOf = new Map<string, number | null>();
  const queued = new Set<string>();
  let chain: Promise<void> = Promise.resolve();

  const keepLast = async (runId: string, rootTaskId: string | null): Promise<number | null> => {
    if (keepLastOf.has(runId)) return keepLastOf.get(runId)!;
    const root = rootTaskId ? await d.store.getTask(rootTaskId) : undefined;
    const k = root?.kind === PLAN_KIND ? ((root.input as { environment?: { snapshot?: { keepLast?: unknown } } } | null)?.environment?.snapshot?.keepLast ?? null) : null;
    const value = typeof k === 'number' ? k : null;
    keepLastOf.set(runId, value);
    if (keepLastOf.size > KEPT) keepLastOf.delete(keepLastOf.keys().next().value!);
    return value;
  };

  const pass = async (sessionId: string): Promise<void> => {
    for (const run of await d.store.listRuns({ sessionId, states: ['running'] })) {
      const k = await keepLast(run.id, run.rootTaskId);
      if (k === null) continue;
      const doc = await d.store.getDocument(sandboxDocId(run.id));
      const pointer = (doc ? d.documents.rebuild(doc) : null) as { snapshotId?: Json; leaseId?: Json } | null;
      const keep = await forkPointsInUse(d.store);
      if (typeof pointer?.snapshotId === 'string') keep.add(pointer.snapshotId);
      const lease = typeof pointer?.leaseId === 'string' ? await d.store.getLease(pointer.leaseId) : undefined;
      const keepImages = new Set(lease ? [lease.imageDigest] : []);
      await pruneRunning(
        { store: d.store, removeSnapshot: d.engine.removeSnapshot, clock: d.clock, logger: d.logger, materialize: (imageId) => d.images.materialize(imageId) },
        { runId: run.id, sessionId, keepLast: k, window: 2 * every, keep, keepImages },
      );
    }
  };

  kernel.onCommit((e) => {
    const n = (counts.get(e.sessionId) ?? 0) + 1;
    counts.delete(e.sessionId);
    if (n < every) {
      counts.set(e.sessionId, n);
      if (counts.size > KEPT) counts.delete(counts.keys().next().value!);
      return;
    }
    if (queued.has(e.sessionId)) return;
    queued.add(e.sessionId);
    chain = chain
      .then(() => pass(e.sessionId))
      .catch((err: unknown) => d.logger.warn({ err, sessionId: e.sessionId }, 'retention of a running run failed; the run end prunes'))
      .finally(() => queued.delete(e.sessionId));
  });
  return { settled: () => chain };
}
