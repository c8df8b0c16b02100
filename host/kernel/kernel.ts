import type { Logger } from 'pino';
import type { Json, Run, RunState, RunVersions, Task } from '../model';
import type { CommitInput, CommitResult, Store } from '../store';
import type { Clock } from '../support/clock';
import type { DocumentTypes } from './documents';
import type { HandlerRegistry } from './registry';
import { ExecutionRight, type ExecutionRightLost } from './execution-right';
import { cancelIdle, checkCompleting, checkWait, countRestart, deliverSignal, startTask, transition, wakeSleeper, type IdleTransitionDeps } from './idle-transitions';
import { runPhase } from './phase-runner';
import { SessionFencing } from './session-fencing';
import { waitForRun } from './wait-for-run';
import type { SessionLost, SessionOwnershipOptions } from './session-owners';

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

export interface CommitEvent {
  label: string;
  seq: number;
  sessionId: string;
  taskIds: string[];
  runIds: string[];
}

const ACTIVE: Task['status'][] = ['pending', 'running', 'waiting', 'sleeping', 'completing'];

/**
 * The scheduler. It owns every task of its store while its fencing epoch is current, runs saved
 * phases, wakes sleepers and waiters, settles `completing` tasks and carries cancellation down
 * to owned subtasks. All of its state that matters is in the store: a new Kernel on the same
 * store continues where a dead one stopped.
 */
export class Kernel {
  private readonly executing = new Map<string, AbortController>();
  private readonly recovering = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly ready: string[] = [];
  private readonly listeners = new Set<(e: CommitEvent) => void>();
  private pumping: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private poller: NodeJS.Timeout | null = null;
  private beater: NodeJS.Timeout | null = null;
  private stopping = false;
  private readonly deps: IdleTransitionDeps;
  private readonly concurrency: number;
  private started = false;
  private draining = false;
  /** How this kernel holds its right to commit: store-wide, or one claim per session. */
  private readonly owner: ExecutionRight | SessionFencing;
  private readonly executingSession = new Map<string, string>();

  constructor(private readonly o: KernelOptions) {
    this.concurrency = o.concurrency ?? 4;
    this.owner = o.ownership
      ? new SessionFencing(o.store, o.logger, o.ownership, (sessionId, why) => this.abortSession(sessionId, why))
      : new ExecutionRight(o.store, o.logger, o.fenceScope ?? 'kernel', () => this.stop());
    this.deps = { ...o, commit: (input) => this.commit(input), markDirty: (taskId) => this.markDirty(taskId) };
    // A newly registered handler may unblock saved tasks; only a started kernel (holding its epoch) acts on it.
    o.registry.onRegister(() => void (this.started && this.poll()));
  }

  /** Takes the fencing epoch and resumes every unfinished task (DESIGN.md "resume"). */
  async start(): Promise<void> {
    if (this.owner.kind === 'sessions') {
      // Per-session: nothing is resumed until a session is adopted.
      this.started = true;
      this.poller = setInterval(() => void this.poll(), this.o.pollMs ?? 500);
      this.beater = setInterval(() => void this.heartbeat(), this.o.heartbeatMs ?? 2000);
      return;
    }
    await this.owner.acquire(this.o.hostId);
    this.started = true;
    const drives = await this.owner.drives();
    for (const task of await this.drivable(await this.o.store.listTasks({ statuses: ['running'] }))) if (drives(task.sessionId)) await this.countRestart(task);
    this.poller = setInterval(() => void this.poll(), this.o.pollMs ?? 500);
    this.beater = setInterval(() => void this.heartbeat(), this.o.heartbeatMs ?? 2000);
    await this.poll();
  }

  /** Stops scheduling; phases in flight are signalled and their decisions are not committed. */
  async stop(): Promise<void> {
    const first = !this.stopping;
    this.stopping = true;
    if (this.poller) clearInterval(this.poller);
    if (this.beater) clearInterval(this.beater);
    if (this.timer) clearTimeout(this.timer);
    for (const c of this.executing.values()) c.abort(new Error('host stopping'));
    while (this.executing.size > 0 || this.pumping) await new Promise((r) => setTimeout(r, 5));
    if (first) await this.owner.release();
  }

  /**
   * SIGTERM of a worker: no new phase starts; phases in flight get `graceMs` to finish and commit,
   * then are stopped (left durably in flight, as a crash leaves them); owned sessions are released.
   */
  async drain(graceMs: number): Promise<void> {
    this.draining = true;
    const until = Date.now() + graceMs;
    while (this.executing.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    await this.stop();
  }

  /**
   * Drives the session from now on under `epoch` (a claim the caller took): its tasks a dead
   * owner left `running` count a restart and re-enter their saved phase, as on a host start.
   */
  async adopt(sessionId: string, epoch: number): Promise<void> {
    if (this.owner.kind !== 'sessions') throw new Error('adopt needs a kernel with per-session ownership');
    this.owner.add(sessionId, epoch);
    for (const task of await this.o.store.listTasks({ sessionId, statuses: ['running'] })) await this.countRestart(task);
    await this.poll();
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

  /** Stops every phase of the session at once (their signals abort their execs and kill what they started). */
  private async abortSession(sessionId: string, why: string): Promise<void> {
    for (const [taskId, sid] of this.executingSession) if (sid === sessionId) this.executing.get(taskId)?.abort(new Error(why));
    for (const id of [...this.ready]) if (this.executingSession.get(id) === sessionId) this.ready.splice(this.ready.indexOf(id), 1);
  }

  /**
   * Called once when another host takes the execution right of this store (seen by a refused
   * commit or heartbeat): this kernel has stopped and commits nothing more.
   */
  onLost(listener: (l: ExecutionRightLost) => void): () => void {
    return this.owner.kind === 'store' ? this.owner.onLost(listener) : () => {};
  }

  private async heartbeat(): Promise<void> {
    if (this.stopping || !this.started) return;
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
    if (fence === null) return { ok: false, conflict: { kind: 'fence', scope: `session:${input.sessionId}`, expected: 0, actual: null } };
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

  markDirty(taskId: string): void {
    if (this.stopping || !this.started) return;
    this.dirty.add(taskId);
    this.pumping ??= this.pump().finally(() => (this.pumping = null));
  }

  /**
   * Without the tasks of imported runs: an imported run is a record loaded from another store,
   * never driven (the store refuses its commits too; skipping it here keeps the host from trying).
   */
  private async drivable(tasks: Task[]): Promise<Task[]> {
    const imported = await this.o.store.listImportedRuns();
    if (imported.length === 0) return tasks;
    const sessions = new Set(imported.map((r) => r.sessionId));
    return tasks.filter((t) => !sessions.has(t.sessionId));
  }

  private async poll(): Promise<void> {
    if (this.stopping) return;
    let active: Task[];
    try {
      active = await this.drivable(await this.o.store.listTasks({ statuses: ACTIVE }));
    } catch (err) {
      // Polls run from timers: a read refused by a busy store waits for the next poll instead of
      // ending the host as an unhandled rejection (exit 1, mid-run).
      this.o.logger.warn({ err }, 'could not read the store\'s active tasks; trying again at the next poll');
      return;
    }
    const drives = await this.owner.drives().catch(() => null);
    if (!drives) return;
    for (const t of active) {
      if (!drives(t.sessionId)) continue;
      if (!this.executing.has(t.id) || t.cancelRequested) this.markDirty(t.id);
    }
  }

  private async pump(): Promise<void> {
    // A task marked dirty while armTimer awaits finds `pumping` still set and starts no pump of
    // its own; looping until the set is empty keeps it from waiting for the next poll.
    do {
      while (this.dirty.size > 0 && !this.stopping) {
        const [id] = this.dirty;
        this.dirty.delete(id!);
        try {
          await this.examine(id!);
        } catch (err) {
          this.o.logger.error({ taskId: id, err }, 'examining task failed');
        }
      }
      await this.armTimer().catch((err: unknown) => this.o.logger.warn({ err }, 'could not arm the wake-up timer; the next poll does'));
    } while (this.dirty.size > 0 && !this.stopping);
  }

  private async examine(id: string): Promise<void> {
    const running = this.executing.get(id);
    const task = await this.o.store.getTask(id);
    if (!task) return;
    if (!this.owner.holds(task.sessionId)) return;
    if (running) {
      if (task.cancelRequested) running.abort(new Error('task cancelled'));
      return;
    }
    if (task.status === 'terminal') return;
    if (task.cancelRequested && task.status !== 'completing') return cancelIdle(this.deps, task);
    // A cancel committed while no host ran is applied first: no phase of a cancelling run starts
    // again (a step left in flight would otherwise run, or be judged, before its cancel).
    if ((task.status === 'pending' || (task.status === 'running' && task.restarts > 0)) && task.runId && (await this.o.store.getRun(task.runId))?.state === 'cancelling') return cancelIdle(this.deps, task);
    switch (task.status) {
      case 'pending':
      case 'running':
        return this.startOrQueue(task);
      case 'sleeping':
        return wakeSleeper(this.deps, task);
      case 'waiting':
        return checkWait(this.deps, task);
      case 'completing':
        return checkCompleting(this.deps, task);
    }
  }

  private async startOrQueue(task: Task): Promise<void> {
    if (this.draining) return;
    const blocked = this.o.registry.blockedReason(task.kind, task.kindVersion, task.phase);
    if (blocked) {
      if (task.blockedReason !== blocked) await transition(this.deps, task, 'task.blocked', { blockedReason: blocked });
      return;
    }
    if (this.executing.size >= this.concurrency) {
      if (!this.ready.includes(task.id)) this.ready.push(task.id);
      return;
    }
    let current = task;
    if (task.status === 'pending' || task.blockedReason !== null) {
      const next = await startTask(this.deps, task);
      if (!next) return;
      current = next;
    }
    const controller = new AbortController();
    this.executing.set(current.id, controller);
    this.executingSession.set(current.id, current.sessionId);
    const handler = this.o.registry.find(current.kind, current.kindVersion)!;
    const recovered = this.recovering.delete(current.id);
    // A phase of a session this kernel lost meanwhile commits nothing (the store would refuse it anyway).
    const held = this.owner.stillHeld(current.sessionId);
    const gone = () => this.stopping || !held();
    void runPhase(this.deps, current, handler, { signal: controller.signal, recovered, stopping: gone })
      .then((end) => {
        if (end.committed && end.task.parentId && end.task.status === 'terminal') this.markDirty(end.task.parentId);
      })
      .catch((err) => this.o.logger.error({ taskId: current.id, err }, 'phase runner failed'))
      .finally(() => {
        this.executing.delete(current.id);
        this.executingSession.delete(current.id);
        this.markDirty(current.id);
        const next = this.ready.shift();
        if (next) this.markDirty(next);
      });
  }

  /**
   * Delivers an outside signal to a task awaiting it: the task re-enters the awaited phase with
   * `payload` under `checkpoint[signal]`, in one commit with any run transitions the caller adds.
   * False when the task is not waiting for that signal (already delivered, or never asked).
   */
  deliver(taskId: string, signal: string, payload: Json, extra: Pick<CommitInput, 'runTransitions' | 'actor' | 'effects'> = {}): Promise<boolean> {
    return deliverSignal(this.deps, taskId, signal, payload, extra);
  }

  /** A task a dead host left `running`: counts a restart and, under the limit, re-enters its saved phase as recovered. */
  private async countRestart(task: Task): Promise<void> {
    if (await countRestart(this.deps, task)) this.recovering.add(task.id);
  }

  private async armTimer(): Promise<void> {
    if (this.stopping) return;
    const next = await this.o.store.nextWakeAt();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (next === null) return;
    const delay = Math.min(Math.max(0, next - this.o.clock.now()), 2 ** 31 - 1);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, delay);
  }
}
