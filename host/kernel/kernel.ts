import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import { BerthError } from '../errors';
import type { Json, Run, RunState, RunVersions } from '../model';
import type { CommitInput, CommitResult, Store } from '../store';
import type { Clock } from '../support/clock';
import type { DocumentTypes } from './documents';
import type { HandlerRegistry } from './registry';
import { deliverSignal, type IdleTransitionDeps } from './idle-transitions';
import { Scheduler } from './scheduler';
import { SessionFencing } from './session-fencing';
import { DEFAULT_OWNERSHIP, type SessionLost, type SessionOwnershipOptions } from './session-owners';
import type { ClaimResult, SessionOwner } from '../store';
import { ownerLostEntries } from './owner-lost';
import { waitForRun } from './wait-for-run';
import { SessionRows } from './session-rows';

export interface KernelOptions {
  store: Store;
  registry: HandlerRegistry;
  documents: DocumentTypes;
  clock: Clock;
  logger: Logger;
  hostId: string;
  /** Phases executing at once. Default 4. */
  concurrency?: number;
  /** How often the store is re-read for changes made by other processes (cancel requests). Default 500 ms. */
  pollMs?: number;
  /** Versions recorded on run transitions. */
  versions?: RunVersions;
  /** How often the host renews its sessions' leases (and so learns it lost one). Default a third of the TTL. */
  heartbeatMs?: number;
  /** The lease of every session claim (database clock). Default 30 s. */
  ownership?: SessionOwnershipOptions;
  /**
   * Which sessions the kernel claims by itself (it drives only sessions it claimed, each fenced by
   * its own epoch; see DESIGN.md "More than one host"):
   * - `all` (default): every session with work that no live owner drives, at start and at each poll,
   *   and every session it commits to (a program's own host, the tests' kernels);
   * - `own`: the sessions it creates or commits to (`berth run`, `resume`, `reconcile`, `chat`);
   * - `none`: only those given to {@link Kernel.adopt} or {@link Kernel.claim} (`berth worker`, a
   *   detached submission, which leaves its run to a worker).
   */
  claim?: 'all' | 'own' | 'none';
  /** Removes the images of snapshots whose decision will never commit (PhaseRunnerDeps.discardSnapshots). */
  discardSnapshots?: (snapshotIds: string[]) => Promise<void>;
}

/** Announced to {@link Kernel.onCommit} listeners after each commit of this host: what it touched. */
export interface CommitEvent {
  label: string;
  seq: number;
  sessionId: string;
  taskIds: string[];
  runIds: string[];
}

/**
 * The task kernel of one host. It drives every task of its store while its fencing epoch is
 * current (or, per-session, the tasks of the sessions adopted into it): its {@link Scheduler}
 * runs saved phases, wakes sleepers and waiters, settles `completing` tasks and carries
 * cancellation down to owned subtasks; every commit goes through {@link Kernel.commit}, fenced.
 * All of its state that matters is in the store: a new Kernel on the same store continues where
 * a dead one stopped.
 */
export class Kernel {
  private readonly listeners = new Set<(e: CommitEvent) => void>();
  private poller: NodeJS.Timeout | null = null;
  private beater: NodeJS.Timeout | null = null;
  private readonly deps: IdleTransitionDeps;
  /** The sessions this kernel claimed, each with its epoch and lease. */
  private readonly owner: SessionFencing;
  private readonly scheduler: Scheduler;
  private readonly mode: 'all' | 'own' | 'none';
  private claiming: Promise<void> | null = null;
  /** Task rows this kernel's own commits wrote, trusted while nobody else commits to their session. */
  private readonly rows: SessionRows;
  /** Aborted once the kernel stopped: a run it no longer drives never settles through it. */
  private readonly halted = new AbortController();

  constructor(private readonly o: KernelOptions) {
    // One listener per wait in progress, each taken off when its wait ends: a server waiting for
    // more than ten runs at once is no leak, and Node's warning said it was.
    setMaxListeners(0, this.halted.signal);
    this.mode = o.claim ?? 'all';
    this.owner = new SessionFencing(o.store, o.logger, o.ownership ?? DEFAULT_OWNERSHIP, { hostId: o.hostId, pid: process.pid }, (sessionId, why) => {
      // Released or lost, a session's kept rows are never trusted again (a later claim starts from a
      // read): keeping them made a worker's memory grow with every run it ever drove.
      this.rows.forget(sessionId);
      return this.scheduler.abortSession(sessionId, why);
    });
    this.rows = new SessionRows((sessionId) => this.owner.epochOf(sessionId));
    this.deps = {
      ...o,
      commit: (input) => this.commit(input),
      markDirty: (taskId) => this.markDirty(taskId),
      knownTask: (taskId) => this.rows.task(taskId),
      observed: (task) => this.rows.observed(task),
    };
    this.scheduler = new Scheduler(this.deps, this.owner, o.concurrency ?? 4);
    // A newly registered handler may unblock saved tasks; only a started kernel (holding its epoch) acts on it.
    o.registry.onRegister(() => void (this.scheduler.started && this.scheduler.poll()));
  }

  /** Starts scheduling; with `claim: 'all'` it claims and resumes every session no live owner drives (DESIGN.md "resume"). */
  async start(): Promise<void> {
    this.scheduler.started = true;
    const ttl = (this.o.ownership ?? DEFAULT_OWNERSHIP).leaseTtlMs;
    this.poller = setInterval(() => void this.tick(), this.o.pollMs ?? 500);
    // Renewals come three times per TTL, so one late beat never loses a session.
    this.beater = setInterval(() => void this.heartbeat(), this.o.heartbeatMs ?? Math.max(50, Math.floor(ttl / 3)));
    await this.tick();
  }

  private async tick(): Promise<void> {
    if (this.mode === 'all') await this.claimAvailable().catch((err: unknown) => this.o.logger.warn({ err }, 'could not claim sessions; trying again at the next poll'));
    await this.scheduler.poll();
  }

  /**
   * Sessions with work that no live owner drives (none, released, lease run out, or a dead process
   * of this machine); `orphaned`: only those an owner left without releasing them.
   */
  available(limit: number, opts: { orphaned?: boolean } = {}): Promise<string[]> {
    return this.owner.available(limit, opts);
  }

  /** `claim: 'all'`: takes every session with work that no live owner drives. */
  private claimAvailable(): Promise<void> {
    this.claiming ??= (async () => {
      for (const sessionId of await this.owner.available(100)) {
        if (this.scheduler.stopping) return;
        await this.claim(sessionId);
      }
    })().finally(() => (this.claiming = null));
    return this.claiming;
  }

  /**
   * Claims the session and drives it from now on: refused while a live owner holds it unless
   * `takeOver` (an operator) or that owner is gone (released, lease run out, or a dead process of
   * this machine). Tasks an earlier owner left `running` count a restart and re-enter their phase.
   */
  async claim(sessionId: string, opts: { takeOver?: boolean } = {}): Promise<ClaimResult> {
    const claim = await this.owner.claim(sessionId, opts);
    if (claim.ok) await this.adopt(sessionId, claim.epoch, claim.previous, claim.now);
    return claim;
  }

  /** Stops scheduling; phases in flight are signalled and their decisions are not committed. */
  async stop(): Promise<void> {
    if (this.poller) clearInterval(this.poller);
    if (this.beater) clearInterval(this.beater);
    const first = this.scheduler.halt();
    await this.scheduler.idle();
    if (first) await this.owner.release();
    this.halted.abort(new BerthError('host_stopped', 'this host stopped driving its runs; a run it was waiting for continues at its next drive (berth resume RUN, or the call asked again)', { retryable: true }));
  }

  /**
   * SIGTERM of a worker: no new phase starts; phases in flight get `graceMs` to finish and commit,
   * then are stopped (left durably in flight, as a crash leaves them); owned sessions are released.
   */
  async drain(graceMs: number): Promise<void> {
    this.scheduler.draining = true;
    const until = Date.now() + graceMs;
    while (this.scheduler.executingCount > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    await this.stop();
  }

  /**
   * Drives the session from now on under `epoch` (a claim the caller took): its tasks a dead
   * owner left `running` count a restart and re-enter their saved phase, as on a host start.
   */
  async adopt(sessionId: string, epoch: number, previous: SessionOwner | null = null, at = this.o.clock.now()): Promise<void> {
    await this.scheduler.adopt(sessionId, async () => {
      this.owner.add(sessionId, epoch);
      this.rows.forget(sessionId);
      // Before any restart: the record says which owner ended without releasing the session.
      const lost = await ownerLostEntries(this.o.store, sessionId, previous, { epoch, hostId: this.o.hostId, at });
      if (lost.length) {
        const r = await this.commit({ sessionId, label: 'session.owner-lost', entries: lost });
        if (!r.ok) this.o.logger.warn({ sessionId, conflict: r.conflict }, 'could not record the previous owner of a claimed session');
      }
    });
  }

  /** The sessions this kernel owns now, with their epochs. */
  ownedSessions(): Array<{ sessionId: string; epoch: number }> {
    return this.owner.list();
  }

  /** Aborted (reason `host_stopped`) once this kernel has stopped driving its runs. */
  get stopped(): AbortSignal {
    return this.halted.signal;
  }

  /**
   * What this kernel holds in memory for the sessions it drives: the sessions it owns, and the
   * sessions and task rows it keeps to spare reads. A long-lived host (a worker, `berth mcp`)
   * holds these for the sessions it owns now, never for every session it ever drove.
   */
  held(): { owned: number; keptSessions: number; keptTasks: number } {
    const kept = this.rows.size();
    return { owned: this.owner.list().length, keptSessions: kept.sessions, keptTasks: kept.tasks };
  }

  /** The epoch under which this kernel holds the session, if it does. */
  epochOf(sessionId: string): number | undefined {
    return this.owner.epochOf(sessionId);
  }

  /** Gives a session up cleanly (its run ended): another host may claim it at once. */
  async release(sessionId: string): Promise<void> {
    await this.owner.releaseSession(sessionId);
  }

  /** Called once per session this kernel lost (taken by another host, or its lease ran out); it has stopped all work on it. */
  onSessionLost(listener: (l: SessionLost) => void): () => void {
    return this.owner.onLost(listener);
  }

  private async heartbeat(): Promise<void> {
    if (this.scheduler.stopping || !this.scheduler.started) return;
    await this.owner.heartbeat();
  }

  onCommit(listener: (e: CommitEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Earliest time a sleeping task wakes, or null. */
  nextWakeAt(): Promise<number | null> {
    return this.o.store.nextWakeAt();
  }

  /** Every commit of this host goes through here: fenced, attributed, announced. */
  async commit(input: CommitInput): Promise<CommitResult> {
    // A host that claims what it commits to owns a session before its first write, a new one
    // included: between an unfenced submission and a later claim, another host could take the run.
    if (this.mode !== 'none' && !this.owner.holds(input.sessionId) && !this.scheduler.stopping) {
      const claim = await this.owner.claim(input.sessionId);
      if (!claim.ok) return { ok: false, conflict: { kind: 'fence', scope: `session:${input.sessionId}`, expected: 0, actual: claim.owner.epoch, reason: 'taken' } };
      if (!input.createSession) await this.adopt(input.sessionId, claim.epoch, claim.previous, claim.now);
    }
    const fence = this.owner.fence(input);
    // Not owned (lost, released or never claimed): nothing is written for it again.
    if (fence === null) return { ok: false, conflict: { kind: 'fence', scope: `session:${input.sessionId}`, expected: 0, actual: null, reason: 'missing' } };
    let result: CommitResult;
    // A task this commit creates `running` (SpawnSpec.begin, SubmitInput.start) is readable before
    // the commit is answered (a SQLite commit is applied before its shared flush): a poll meanwhile
    // must not run its phase, which would act on a row not yet durable, ahead of the boundary.
    // Likewise a task it wakes from a wait (a parent woken with its child's end, parent-wake.ts):
    // whoever committed the wake has it examined once the commit is answered.
    const woken = (input.taskTransitions ?? []).filter((t) => t.set.status === 'running' && t.set.wait === null).map((t) => t.taskId);
    const born = [...(input.tasks ?? []).filter((t) => t.status === 'running').map((t) => t.id), ...woken];
    this.scheduler.unborn(born, true);
    try {
      result = await this.o.store.commit({ ...input, actor: input.actor ?? `host:${this.o.hostId}`, ...(fence ? { fence } : {}) });
    } catch (err) {
      // The commit may or may not have happened (a lost connection): nothing kept of the session holds.
      this.rows.forget(input.sessionId);
      throw err;
    } finally {
      this.scheduler.unborn(born, false);
    }
    this.rows.committed(input, fence?.epoch, result);
    if (result.ok) this.scheduler.noteTasks(result.tasks ?? []);
    // A submission that was already there (same request id) leaves this host's fresh claim unused.
    if (!result.ok && input.createSession && result.conflict.kind === 'duplicate_request' && fence) await this.owner.releaseSession(input.sessionId);
    if (result.ok) {
      const event: CommitEvent = {
        label: input.label,
        seq: result.seq,
        sessionId: input.sessionId,
        taskIds: [...(input.taskTransitions ?? []).map((t) => t.taskId), ...(input.tasks ?? []).map((t) => t.id)],
        runIds: [...(input.runTransitions ?? []).map((t) => t.runId), ...(input.runs ?? []).map((r) => r.id)],
      };
      for (const l of this.listeners) l(event);
      for (const id of input.cancelTasks ?? []) this.markDirty(id);
      for (const t of input.tasks ?? []) this.markDirty(t.id);
    } else if (result.conflict.kind === 'fence') this.owner.fenceRefused(input.sessionId, fence);
    return result;
  }

  /** Durable cancellation: the intent is committed first, then the scheduler carries it out. */
  async cancelTask(taskId: string): Promise<void> {
    const task = await this.o.store.getTask(taskId);
    if (!task || task.status === 'terminal') return;
    await this.commit({ sessionId: task.sessionId, label: 'task.cancel-request', cancelTasks: [taskId] });
    this.markDirty(taskId);
  }

  /** Resolves when the run reaches one of `states` (default: a final state or needs_reconciliation). */
  waitForRun(runId: string, opts: { signal?: AbortSignal; states?: RunState[] } = {}): Promise<Run> {
    // A wait outliving the kernel polled a closed store forever, and its timer kept the process
    // alive: `berth mcp` whose client was SIGKILLed mid-call never exited (the orphan spun warnings).
    // Not AbortSignal.any: on Node 20 a combined signal with a listener stays reachable from its
    // sources until one aborts, so one per wait piled up on the kernel's signal.
    return waitForRun({ store: this.o.store, logger: this.o.logger, onCommit: (l) => this.onCommit(l) }, runId, { states: opts.states, signals: [opts.signal, this.halted.signal] });
  }

  /**
   * Delivers an outside signal to a task awaiting it: the task re-enters the awaited phase with
   * `payload` under `checkpoint[signal]`, in one commit with any run transitions the caller adds.
   * False when the task is not waiting for that signal (already delivered, or never asked).
   */
  deliver(taskId: string, signal: string, payload: Json, extra: Pick<CommitInput, 'runTransitions' | 'actor' | 'effects'> = {}): Promise<boolean> {
    return deliverSignal(this.deps, taskId, signal, payload, extra);
  }

  markDirty(taskId: string): void {
    this.scheduler.markDirty(taskId);
  }
}
