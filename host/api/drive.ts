import { BerthError } from '../errors';
import { isFinalRunState, type Run, type RunState } from '../model';
import type { HostRuntime } from '../runtime/host-runtime';
import { releaseEndedRunLeases } from '../runtime/run-end-leases';
import type { Kernel } from '../kernel';
import { duration } from './duration';
import { sessionLeftoversSettled, tasksSettled } from './tasks-settled';
import { endRun, stopRuntime } from './run-end';
import { hostRuntime, operator, type RuntimeOptions, type RuntimeParts } from './runtime';
import { timed } from '../snapshot/timing';

/** The states a driven run settles in: the host stops driving it there. */
export const SETTLED: readonly RunState[] = ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'];

/**
 * A host that owns the sessions it creates or is given with {@link takeRun}; it drives nothing
 * else of the store. Sweeps leftovers first; `swept` counts what it removed.
 */
export async function startHost(p: RuntimeParts, o: Omit<RuntimeOptions, 'claim'> = {}): Promise<{ rt: HostRuntime; swept: number }> {
  const rt = hostRuntime(p, { ...o, claim: 'own' });
  const swept = await timed(p.logger, 'host.sweep', async () => [...(await p.sandbox.sweep()), ...(await releaseEndedRunLeases(p))]);
  await timed(p.logger, 'host.kernel_start', () => rt.kernel.start());
  return { rt, swept: swept.length };
}

/**
 * Makes this host the run's owner (DESIGN.md "More than one host"): a claim on its session,
 * refused while a live host owns it unless `takeOver`, which is recorded on the run's transition
 * log with the operator as actor. A dead process of this machine, a released claim or one whose
 * lease ran out is taken at once. On refusal the kernel is stopped and `run_owned` names the owner.
 */
export async function takeRun(p: RuntimeParts, rt: HostRuntime, run: Run, opts: { takeOver?: boolean; actor?: string } = {}): Promise<number> {
  await assertKindsKnown(p, rt, run).catch(async (err: unknown) => {
    await rt.kernel.stop();
    throw err;
  });
  // A claim that throws (a store whose write lock another process holds) stops the kernel too:
  // left running, its timers kept the command alive after it had said why it failed.
  const claim = await rt.kernel.claim(run.sessionId, { takeOver: opts.takeOver }).catch(async (err: unknown) => {
    await rt.kernel.stop();
    throw err;
  });
  if (!claim.ok) {
    await rt.kernel.stop();
    const o = claim.owner;
    throw new BerthError(
      'run_owned',
      `run ${run.id} is owned by host ${o.holder}${o.pid ? ` (pid ${o.pid})` : ''}, epoch ${o.epoch}, heartbeat ${duration(claim.now - o.heartbeatAt)} ago, lease valid for ${duration(o.leaseUntil - claim.now)} more; ` +
        `it is alive, so nothing was changed. Let it finish, or take the run over: berth resume ${run.id} --take-over`,
      { ids: { runId: run.id, sessionId: run.sessionId }, details: { owner: o } },
    );
  }
  const previous = claim.previous;
  if (opts.takeOver && previous && previous.stoppedAt === null && previous.leaseUntil >= claim.now && !isFinalRunState(run.state)) {
    const actor = opts.actor ?? operator();
    const reason = `taken over by ${actor} from host ${previous.holder}${previous.pid ? ` pid ${previous.pid}` : ''} (epoch ${previous.epoch} -> ${claim.epoch})`;
    const current = (await p.store.getRun(run.id)) ?? run;
    const r = await rt.kernel.commit({ sessionId: run.sessionId, label: 'run.take-over', actor, runTransitions: [{ runId: run.id, from: current.state, to: current.state, actor, reason, ownerChange: true }] });
    if (!r.ok) p.logger.warn({ conflict: r.conflict }, 'take-over transition not recorded');
  }
  return claim.epoch;
}

/**
 * Resolves with `work`, or rejects with `execution_right_lost` as soon as the kernel loses the
 * run's session (another host claimed it, or this host's lease ran out before a renewal reached
 * the store). Without this race a host that lost the run would wait forever for it.
 */
export async function whileHoldingRight<T>(kernel: Kernel, runId: string, work: Promise<T>, sessionId?: string): Promise<T> {
  let off = () => {};
  const lost = new Promise<never>((_, reject) => {
    off = kernel.onSessionLost((l) => {
      if (l.sessionId !== sessionId) return;
      const by = `host ${l.holder ?? '?'}${l.pid ? `, pid ${l.pid}` : ''}`;
      const what =
        l.why === 'expired'
          ? l.renewError
            ? `this host's lease on run ${runId} ran out: its renewals failed (${l.renewError}); it stopped all work on it and commits nothing more for it. Once the store takes writes again, continue with: berth resume ${runId}`
            : `this host's lease on run ${runId} ran out before a renewal reached the store (the process was paused or the store did not answer); it stopped all work on it and commits nothing more for it. Continue with: berth resume ${runId}`
          : `another berth process (${by}) took run ${runId} over (epoch ${l.epoch} is no longer current); this one stopped all work on it and commits nothing more for it. If that host is gone, continue with: berth resume ${runId}`;
      reject(new BerthError('execution_right_lost', what, { ids: { runId, sessionId }, details: { ...l } }));
    });
  });
  try {
    return await Promise.race([work, lost]);
  } finally {
    off();
  }
}

/**
 * Refuses a settle this host only read: a host frozen (SIGSTOP, a paused VM) past its lease wakes
 * to find the run ended by the host that took it meanwhile (a `berth cancel` that waited for the
 * claim's expiry), often before its own renewal tells it the lease is lost. It reported that end as
 * its own ("run R is cancelled"), and applied run-end policy to sandboxes it no longer owned. Now it
 * stops as a host that lost the run does (`execution_right_lost`), saying who ended it.
 */
async function endedElsewhere(p: RuntimeParts, kernel: Kernel, run: Run, epoch: number | undefined): Promise<void> {
  if (epoch === undefined) return;
  const now = await p.store.getSessionOwner(run.sessionId);
  // The same epoch, or a newer one this kernel claimed itself (a host driving several runs of a session): its own.
  if (!now || now.epoch === epoch || kernel.epochOf(run.sessionId) === now.epoch) return;
  throw new BerthError(
    'execution_right_lost',
    `run ${run.id} ended (${run.state}) by host ${now.holder}${now.pid ? ` (pid ${now.pid})` : ''}, which took it (epoch ${now.epoch}) after this host's lease ran out without a renewal (the process was paused or too busy); this host committed nothing more for it`,
    { ids: { runId: run.id, sessionId: run.sessionId }, details: { sessionId: run.sessionId, epoch, holder: now.holder, pid: now.pid, why: 'taken', endedAs: run.state } },
  );
}

/** What {@link drive} ends with: the run as it settled, or `interrupted` when the signal stopped the host first. */
export type Driven = { settled: true; run: Run } | { settled: false; run: Run; reason: unknown };

/**
 * Drives the run until it settles, then applies run-end policy ({@link endRun}); or, when
 * `signal` aborts first, stops without deciding anything (the run keeps its sandbox; a resume
 * continues). The runtime is stopped either way and its background work awaited. A lost right
 * rejects with `execution_right_lost`.
 */
export async function drive(p: RuntimeParts, rt: HostRuntime, runId: string, signal?: AbortSignal, o: { settled?: (run: Run) => Promise<void> } = {}): Promise<Driven> {
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal?.reason ?? new BerthError('interrupted', 'stopped by signal'));
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  let run: Run;
  try {
    const sessionId = (await p.store.getRun(runId))?.sessionId;
    const epoch = sessionId === undefined ? undefined : rt.kernel.epochOf(sessionId);
    run = await timed(p.logger, 'drive.steps', () => whileHoldingRight(rt.kernel, runId, rt.kernel.waitForRun(runId, { signal: stop.signal, states: [...SETTLED] }), sessionId));
    await endedElsewhere(p, rt.kernel, run, epoch);
  } catch (err) {
    const bySignal = signal?.aborted === true;
    stop.abort(); // also ends waitForRun's polling when the right was lost
    await stopRuntime(p, rt);
    // The run keeps its sandbox for the next drive; this host only drops its handle (and its heartbeat).
    rt.planSandbox.held(runId)?.abandon();
    rt.planSandbox.forget(runId);
    if (bySignal) return { settled: false, run: (await p.store.getRun(runId))!, reason: err };
    throw err;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  // An ended run's tasks may still be live (the root of a run `reconcile --fail` ended): this host
  // is their owner now and carries out the cancel before it stops, or nobody would.
  if (isFinalRunState(run.state)) await timed(p.logger, 'drive.tasks_settled', () => tasksSettled(p.store, rt.kernel, runId));
  // So may another ended run's of the same session: this host owns them too, and nobody else would.
  await sessionLeftoversSettled(p.store, rt.kernel, run.sessionId, runId);
  // The outcome is known: the caller reports it (the CLI prints its summary) while the sandbox's
  // release, which the final commit started, and the run-end policy below still run. Neither can
  // change the outcome; a host killed meanwhile leaves them to the next host's start and gc.
  if (o.settled) await o.settled(run).catch(async (err: unknown) => {
    await stopRuntime(p, rt);
    throw err;
  });
  await timed(p.logger, 'drive.stop_runtime', () => stopRuntime(p, rt));
  await timed(p.logger, 'run_end', () => endRun(p, run));
  return { settled: true, run };
}

/**
 * Refuses, before anything is claimed or committed, a run with an unfinished task of a kind this
 * host has no handler for (an application kind registered by a program, such as examples/notify):
 * driving it here would wait forever on a task nobody can run. The error names the kind and says
 * who can settle the run.
 */
export async function assertKindsKnown(p: RuntimeParts, rt: HostRuntime, run: Run): Promise<void> {
  const tasks = await p.store.listTasks({ runId: run.id });
  const unknown = [...new Set(tasks.filter((t) => t.status !== 'terminal' && !rt.registry.find(t.kind, t.kindVersion)).map((t) => `${t.kind}@${t.kindVersion}`))];
  if (!unknown.length) return;
  throw new BerthError(
    'task_kind_unknown',
    `run ${run.id} has unfinished tasks of kind ${unknown.join(', ')}, which this host cannot run: nothing was changed. ` +
      'The program that registers that kind (its extension, through the library API) must resume or reconcile it, or a berth that loads its extension module ' +
      '(berth --extension MODULE ..., or BERTH_EXTENSIONS); berth cancel RUN records the intent for it',
    { ids: { runId: run.id, sessionId: run.sessionId }, details: { kinds: unknown } },
  );
}
