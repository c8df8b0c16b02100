import type { Logger } from 'pino';
import type { Json, Run, RunState, RunVersions } from '../model';
import type { CommitInput, CommitResult, Store } from '../store';
import type { Clock } from '../support/clock';
import type { DocumentTypes } from './documents';
import type { HandlerRegistry } from './registry';
import { ExecutionRight, type ExecutionRightLost } from './execution-right';
import { deliverSignal, type IdleTransitionDeps } from './idle-transitions';
import { Scheduler } from './scheduler';
import { SessionFencing } from './session-fencing';
import type { SessionLost, SessionOwnershipOptions } from './session-owners';
import { waitForRun } from './wait-for-run';

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
  /** The fencing scope this host takes on start. Default "kernel". */
  fenceScope?: string;
  /** How often the host heartbeats its execution right (and so learns it lost it). Default 2000 ms. */
  heartbeatMs?: number;
  /**
   * Per-session ownership (`berth worker`, issue 15): the kernel takes no store-wide right and drives
   * only the sessions it was given with {@link Kernel.adopt}, each fenced by its own epoch.
   */
  ownership?: SessionOwnershipOptions;
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
  /** How this kernel holds its right to commit: store-wide, or one claim per session. */
  private readonly owner: ExecutionRight | SessionFencing;
  private readonly scheduler: Scheduler;

  constructor(private readonly o: KernelOptions) {
    this.owner = o.ownership
      ? new SessionFencing(o.store, o.logger, o.ownership, (sessionId, why) => this.scheduler.abortSession(sessionId, why))
      : new ExecutionRight(o.store, o.logger, o.fenceScope ?? 'kernel', () => this.stop());
    this.deps = { ...o, commit: (input) => this.commit(input), markDirty: (taskId) => this.markDirty(taskId) };
    this.scheduler = new Scheduler(this.deps, this.owner, o.concurrency ?? 4);
    // A newly registered handler may unblock saved tasks; only a started kernel (holding its epoch) acts on it.
    o.registry.onRegister(() => void (this.scheduler.started && this.scheduler.poll()));
  }

  /** Takes the fencing epoch and resumes every unfinished task (DESIGN.md "resume"). */
  async start(): Promise<void> {
    // Per-session: no right is taken here and nothing is resumed until a session is adopted.
    if (this.owner.kind === 'store') await this.owner.acquire(this.o.hostId);
    this.scheduler.started = true;
    if (this.owner.kind === 'store') await this.scheduler.resume();
    this.poller = setInterval(() => void this.scheduler.poll(), this.o.pollMs ?? 500);
    this.beater = setInterval(() => void this.heartbeat(), this.o.heartbeatMs ?? 2000);
    if (this.owner.kind === 'store') await this.scheduler.poll();
  }

  /** Stops scheduling; phases in flight are signalled and their decisions are not committed. */
  async stop(): Promise<void> {
    if (this.poller) clearInterval(this.poller);
    if (this.beater) clearInterval(this.beater);
    const first = this.scheduler.halt();
    await this.scheduler.idle();
    if (first) await this.owner.release();
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
  async adopt(sessionId: string, epoch: number): Promise<void> {
    if (this.owner.kind !== 'sessions') throw new Error('adopt needs a kernel with per-session ownership');
    this.owner.add(sessionId, epoch);
    for (const task of await this.o.store.listTasks({ sessionId, statuses: ['running'] })) await this.scheduler.restart(task);
    await this.scheduler.poll();
  }

  /** The sessions this kernel owns now, with their epochs. */
  ownedSessions(): Array<{ sessionId: string; epoch: number }> {
    return this.owner.kind === 'sessions' ? this.owner.list() : [];
  }

  /** Gives a session up cleanly (its run ended): another host may claim it at once. */
  async release(sessionId: string): Promise<void> {
    if (this.owner.kind === 'sessions') await this.owner.releaseSession(sessionId);
  }

  /** Called once per session this kernel lost to another host; it has stopped all work on it. */
  onSessionLost(listener: (l: SessionLost) => void): () => void {
    return this.owner.kind === 'sessions' ? this.owner.onLost(listener) : () => {};
  }

  /**
   * Called once when another host takes the execution right of this store (seen by a refused
   * commit or heartbeat): this kernel has stopped and commits nothing more.
   */
  onLost(listener: (l: ExecutionRightLost) => void): () => void {
    return this.owner.kind === 'store' ? this.owner.onLost(listener) : () => {};
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
    const fence = this.owner.fence(input);
    // Not owned (lost, released or never claimed): nothing is written for it again.
    if (fence === null) return { ok: false, conflict: { kind: 'fence', scope: `session:${input.sessionId}`, expected: 0, actual: null, reason: 'missing' } };
    const result = await this.o.store.commit({ ...input, actor: input.actor ?? `host:${this.o.hostId}`, ...(fence ? { fence } : {}) });
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
    return waitForRun({ store: this.o.store, logger: this.o.logger, onCommit: (l) => this.onCommit(l) }, runId, opts);
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
