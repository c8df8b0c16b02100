import { PlacementCheck, Worker } from '../fleet';
import { isFinalRunState, type Run } from '../model';
import { releaseEndedRunLeases } from '../runtime/run-end-leases';
import { endRun, stopRuntime } from './run-end';
import { heartbeatEvery, hostRuntime, leaseTtlMs, type RuntimeParts } from './runtime';

export interface WorkerOptions {
  /** Runs driven at once (default 2). */
  concurrency?: number;
  /** A run submitted with tags is claimed only by a worker that has every one of them. */
  tags?: string[];
  /** The ownership lease (default `BERTH_LEASE_TTL_MS` or 30 s). */
  leaseTtlMs?: number;
  /** A session was claimed; `from` names the owner it was taken from and why it could be. */
  onClaim?: (sessionId: string, epoch: number, from: { holder: string; why: string } | null) => void;
  /** This worker lost a session to another host and stopped all work on it. */
  onLost?: (l: { sessionId: string; epoch: number; holder: string | null; pid: number | null }) => void;
  /** An operator asked this worker to drain (`berth drain HOST`); the caller drains it. */
  onDrainRequested?: () => void;
  /** A run this worker drove ended (its session released), with the reason of its last transition. */
  onRunEnded?: (run: Run, reason: string) => void;
}

/** A started worker: {@link RunningWorker.drain} stops claiming, lets phases finish within a grace, releases its leases. */
export interface RunningWorker {
  readonly id: string;
  readonly concurrency: number;
  readonly tags: string[];
  readonly leaseTtlMs: number;
  drain(graceMs: number): Promise<void>;
}

/**
 * A fleet worker over the host's one runtime (registry transport, artifact store, extensions),
 * claiming runnable and orphaned runs from the store. Each run it finishes gets the same run-end
 * policy as `berth run` ({@link endRun}: sandboxes released, retention, pruned registry copies).
 */
export async function startWorker(p: RuntimeParts, o: WorkerOptions = {}): Promise<RunningWorker> {
  const concurrency = o.concurrency ?? 2;
  const tags = o.tags ?? [];
  const ttl = o.leaseTtlMs ?? leaseTtlMs(undefined);
  // Phases at once: a plan run holds its waiting root task and one step.
  const rt = hostRuntime(p, { claim: 'none', ttlMs: ttl, concurrency: Math.max(4, concurrency * 2) });
  let rounds = 0;
  const worker = new Worker({
    store: p.store,
    kernel: rt.kernel,
    sandbox: p.sandbox,
    // A worker claims only runs whose base image its engine has or can pull from the registry.
    placement: new PlacementCheck({ store: p.store, sandbox: p.sandbox, hostRegistry: p.registry }),
    ...(o.onDrainRequested ? { onDrainRequested: o.onDrainRequested } : {}),
    logger: p.logger,
    hostId: p.hostId,
    pid: process.pid,
    concurrency,
    tags,
    leaseTtlMs: ttl,
    claimEveryMs: Math.min(1000, heartbeatEvery(ttl)),
    onClaim: o.onClaim,
    // What `berth run` does at a run's end, for each ended run of the released session.
    onReleased: async (sessionId) => {
      for (const run of await p.store.listRuns({ sessionId })) {
        await endRun(p, run);
        if (o.onRunEnded && isFinalRunState(run.state)) o.onRunEnded(run, (await p.store.listRunTransitions(run.id)).at(-1)?.reason ?? '');
      }
      await p.sandbox.sweep();
    },
    onTick: async () => {
      // Ended runs' sandboxes go (the runtime releases them at run end; this catches what a dead owner left).
      if (rounds++ % 10 !== 0) return;
      await releaseEndedRunLeases(p).catch((err: unknown) => p.logger.warn({ err }, 'could not release ended runs\' leases'));
      await p.sandbox.sweep().catch((err: unknown) => p.logger.warn({ err }, 'sweep failed; the next round tries again'));
    },
  });
  if (o.onLost) rt.kernel.onSessionLost((l) => o.onLost!({ sessionId: l.sessionId, epoch: l.epoch, holder: l.holder ?? null, pid: l.pid ?? null }));
  await p.sandbox.sweep().catch((err: unknown) => p.logger.warn({ err }, 'start-up sweep failed'));
  await worker.start();
  return {
    id: worker.id,
    concurrency,
    tags,
    leaseTtlMs: ttl,
    async drain(graceMs) {
      await worker.drain(graceMs);
      await stopRuntime(p, rt);
      await p.sandbox.sweep().catch((err: unknown) => p.logger.warn({ err }, 'drain sweep failed; berth gc removes what is left'));
    },
  };
}
