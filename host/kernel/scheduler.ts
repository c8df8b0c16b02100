import type { Run, Task } from '../model';
import type { Fencing } from './fencing';
import { cancelIdle, checkCompleting, checkWait, countRestart, startTask, transition, wakeSleeper, type IdleTransitionDeps } from './idle-transitions';
import { runPhase } from './phase-runner';

const ACTIVE: Task['status'][] = ['pending', 'running', 'waiting', 'sleeping', 'completing'];
/** The pause before a task whose phase runner failed runs again, doubled per failure in a row, and its bound. */
const RETRY_FIRST_MS = 50;
const RETRY_MAX_MS = 5_000;

/**
 * What runs next, in memory: the tasks to examine, the phases executing (at most `concurrency`)
 * and those queued for a free slot, and the timer of the next sleeper. Everything it decides is
 * a commit through `deps.commit`; nothing here survives the process, and a new scheduler rebuilt
 * from the store carries on (DESIGN.md "resume").
 */
export class Scheduler {
  /** Set once the kernel holds its right; before that nothing is examined. */
  started = false;
  /** A draining worker starts no new phase. */
  draining = false;
  private halted = false;
  private readonly executing = new Map<string, AbortController>();
  private readonly executingSession = new Map<string, string>();
  private readonly recovering = new Set<string>();
  /** Sessions being adopted: none of their phases starts before the restarts of the old owner's phases are counted. */
  private readonly adopting = new Map<string, number>();
  private readonly dirty = new Set<string>();
  /** Tasks a commit of this kernel is creating `running`, until it is answered (not examined meanwhile). */
  private readonly creating = new Set<string>();
  private readonly ready: string[] = [];
  /** Executing phases that wait without holding a slot (PhaseContext.idle). */
  private readonly parked = new Set<string>();
  /** Tasks whose phase runner failed (a store that refused the write: full, read-only), with how many times in a row. */
  private readonly failing = new Map<string, number>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private pumping: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** When each sleeping task of the driven sessions wakes, from every row this scheduler saw (reads and commit answers). */
  private readonly sleepers = new Map<string, { wakeAt: number; sessionId: string }>();

  constructor(
    private readonly d: IdleTransitionDeps,
    private readonly owner: Fencing,
    private readonly concurrency: number,
  ) {}

  get stopping(): boolean {
    return this.halted;
  }

  /** Phases executing now. */
  get executingCount(): number {
    return this.executing.size;
  }

  /** Stops scheduling and signals every phase in flight; true the first time. */
  halt(): boolean {
    const first = !this.halted;
    this.halted = true;
    if (this.timer) clearTimeout(this.timer);
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    for (const c of this.executing.values()) c.abort(new Error('host stopping'));
    return first;
  }

  /** Resolves once no phase executes and no examination is under way. */
  async idle(): Promise<void> {
    while (this.executing.size > 0 || this.pumping) await new Promise((r) => setTimeout(r, 5));
  }

  markDirty(taskId: string): void {
    if (this.halted || !this.started) return;
    this.dirty.add(taskId);
    this.startPump();
  }

  private startPump(): void {
    // A task marked dirty after the pump's last look at the set but before its promise settled
    // found `pumping` still set and started nothing: the pump looks again once it has settled.
    this.pumping ??= this.pump().finally(() => {
      this.pumping = null;
      if (this.dirty.size > 0 && !this.halted && this.started) this.startPump();
    });
  }

  /** A task a dead host left `running`: counts a restart and, under the limit, re-enters its saved phase as recovered. */
  async restart(task: Task): Promise<void> {
    if (await countRestart(this.d, task)) this.recovering.add(task.id);
  }

  /** Stops every phase of the session at once (their signals abort their execs and kill what they started). */
  async abortSession(sessionId: string, why: string): Promise<void> {
    // Its sleepers are no longer this scheduler's to wake (a past wake time would re-arm the timer at once, for ever).
    for (const [id, sl] of this.sleepers) if (sl.sessionId === sessionId) this.sleepers.delete(id);
    for (const [taskId, sid] of this.executingSession) if (sid === sessionId) this.executing.get(taskId)?.abort(new Error(why));
    for (const id of [...this.ready]) if (this.executingSession.get(id) === sessionId) this.ready.splice(this.ready.indexOf(id), 1);
  }

  /**
   * Without the tasks of imported runs: an imported run is a record loaded from another store,
   * never driven (the store refuses its commits too; skipping it here keeps the host from trying).
   */
  private async drivable(tasks: Task[]): Promise<Task[]> {
    const imported = await this.d.store.listImportedRuns();
    if (imported.length === 0) return tasks;
    const sessions = new Set(imported.map((r) => r.sessionId));
    return tasks.filter((t) => !sessions.has(t.sessionId));
  }

  /**
   * A claimed session: its tasks a dead owner left `running` count a restart (and re-enter their
   * phase as recovered), then every active task of it is examined. `before` runs first, inside
   * the hold: from the claim on, an examination of the session's tasks (a phase of the old epoch
   * ending here, a commit's answer) must not start a phase from a row whose restart is not counted
   * yet; its compare-and-set would lose to the restart's commit.
   */
  async adopt(sessionId: string, before: () => Promise<void> = async () => {}): Promise<void> {
    this.adopting.set(sessionId, (this.adopting.get(sessionId) ?? 0) + 1);
    let active: Task[];
    try {
      await before();
      active = await this.d.store.listTasks({ sessionId, statuses: ACTIVE });
      for (const task of active) if (task.status === 'running') await this.restart(task);
    } finally {
      const n = this.adopting.get(sessionId)! - 1;
      if (n > 0) this.adopting.set(sessionId, n);
      else this.adopting.delete(sessionId);
    }
    for (const t of active) if (!this.executing.has(t.id)) this.markDirty(t.id);
  }

  /** Rows a commit of this kernel just wrote: when they sleep, and until when. */
  noteTasks(tasks: Task[]): void {
    for (const t of tasks) this.note(t);
  }

  private note(t: Task): void {
    if (t.status === 'sleeping' && t.wakeAt !== null) this.sleepers.set(t.id, { wakeAt: t.wakeAt, sessionId: t.sessionId });
    else this.sleepers.delete(t.id);
  }

  /**
   * Re-reads the driven sessions' active tasks for work other processes made (cancel requests,
   * deliveries, due sleepers); a kernel that drives nothing reads nothing.
   */
  async poll(): Promise<void> {
    if (this.halted) return;
    const sessions = this.owner.list().map((o) => o.sessionId);
    if (sessions.length === 0) {
      this.sleepers.clear();
      return;
    }
    let active: Task[];
    try {
      active = await this.drivable(await this.d.store.listTasks({ sessionIds: sessions, statuses: ACTIVE }));
    } catch (err) {
      // Polls run from timers: a read refused by a busy store waits for the next poll instead of
      // ending the host as an unhandled rejection (exit 1, mid-run).
      this.d.logger.warn({ err }, 'could not read the store\'s active tasks; trying again at the next poll');
      return;
    }
    const drives = await this.owner.drives().catch(() => null);
    if (!drives) return;
    // Sleepers of sessions no longer driven are not this scheduler's to wake.
    for (const [id, sl] of this.sleepers) if (!drives(sl.sessionId)) this.sleepers.delete(id);
    for (const t of active) {
      if (!drives(t.sessionId)) continue;
      // A row that differs from the one this kernel's commits left: someone else wrote (a cancel request, a delivery).
      this.d.observed?.(t);
      this.note(t);
      if (!this.executing.has(t.id) || t.cancelRequested) this.markDirty(t.id);
    }
  }

  private async pump(): Promise<void> {
    // A task marked dirty while armTimer awaits finds `pumping` still set and starts no pump of
    // its own; looping until the set is empty keeps it from waiting for the next poll.
    do {
      while (this.dirty.size > 0 && !this.halted) {
        const [id] = this.dirty;
        this.dirty.delete(id!);
        try {
          await this.examine(id!);
        } catch (err) {
          this.d.logger.error({ taskId: id, err }, 'examining task failed');
        }
      }
      await this.armTimer().catch((err: unknown) => this.d.logger.warn({ err }, 'could not arm the wake-up timer; the next poll does'));
    } while (this.dirty.size > 0 && !this.halted);
  }

  /** Marks tasks a commit in flight creates `running` (`on`), or that commit as answered; the kernel marks them dirty after. */
  unborn(ids: string[], on: boolean): void {
    for (const id of ids) if (on) this.creating.add(id);
    else this.creating.delete(id);
  }

  private async examine(id: string): Promise<void> {
    if (this.creating.has(id)) return;
    const running = this.executing.get(id);
    const task = this.d.knownTask?.(id) ?? (await this.d.store.getTask(id));
    if (!task || !this.owner.holds(task.sessionId)) {
      this.sleepers.delete(id);
      return;
    }
    this.note(task);
    if (running) {
      if (task.cancelRequested) running.abort(new Error('task cancelled'));
      return;
    }
    if (task.status === 'terminal') return;
    // Examined again at the end of the adoption.
    if (this.adopting.has(task.sessionId)) return;
    if (task.cancelRequested && task.status !== 'completing') return cancelIdle(this.d, task);
    // A cancel committed while no host ran is applied first: no phase of a cancelling run starts
    // again (a step left in flight would otherwise run, or be judged, before its cancel).
    const run = (task.status === 'pending' || (task.status === 'running' && task.restarts > 0)) && task.runId ? await this.d.store.getRun(task.runId) : undefined;
    if (run?.state === 'cancelling') return cancelIdle(this.d, task);
    switch (task.status) {
      case 'pending':
      case 'running':
        return this.startOrQueue(task, run);
      case 'sleeping':
        return wakeSleeper(this.d, task);
      case 'waiting':
        return checkWait(this.d, task);
      case 'completing':
        return checkCompleting(this.d, task);
    }
  }

  /** @param run the task's run as examine just read it (a pending root task's start moves it). */
  private async startOrQueue(task: Task, run?: Run): Promise<void> {
    if (this.draining) return;
    const blocked = this.d.registry.blockedReason(task.kind, task.kindVersion, task.phase);
    if (blocked) {
      if (task.blockedReason !== blocked) await transition(this.d, task, 'task.blocked', { blockedReason: blocked });
      return;
    }
    if (this.executing.size - this.parked.size >= this.concurrency) {
      if (!this.ready.includes(task.id)) this.ready.push(task.id);
      return;
    }
    let current = task;
    if (task.status === 'pending' || task.blockedReason !== null) {
      const next = await startTask(this.d, task, run);
      if (!next) return;
      current = next;
    }
    const controller = new AbortController();
    this.executing.set(current.id, controller);
    this.executingSession.set(current.id, current.sessionId);
    const handler = this.d.registry.find(current.kind, current.kindVersion)!;
    const recovered = this.recovering.delete(current.id);
    // A phase of a session this kernel lost meanwhile commits nothing (the store would refuse it anyway).
    const held = this.owner.stillHeld(current.sessionId);
    const gone = () => this.halted || !held();
    const park = (on: boolean) => {
      if (!on) return void this.parked.delete(current.id);
      this.parked.add(current.id);
      // The slot it gives back goes to the next queued task now, not when some phase ends.
      const next = this.ready.shift();
      if (next) this.markDirty(next);
    };
    void runPhase(this.d, current, handler, { signal: controller.signal, recovered, stopping: gone, park })
      .then((end) => {
        // On the next turn of the event loop: what waits on this commit (an MCP answer, a caller
        // of waitForRun) goes out before the parent's next phase and commit take the loop.
        if (end.committed && end.task.parentId && end.task.status === 'terminal') setImmediate(() => this.markDirty(end.task.parentId!));
      })
      .then(
        () => void this.failing.delete(current.id),
        (err: unknown) => {
          const n = (this.failing.get(current.id) ?? 0) + 1;
          this.failing.set(current.id, n);
          this.d.logger.error({ taskId: current.id, err, failures: n }, 'phase runner failed');
        },
      )
      .finally(() => {
        this.parked.delete(current.id);
        this.executing.delete(current.id);
        this.executingSession.delete(current.id);
        this.retryOrExamine(current.id);
        const next = this.ready.shift();
        if (next) this.markDirty(next);
      });
  }

  /**
   * Examines a task whose phase ended; one whose runner failed, only after a pause that doubles
   * with each failure in a row (up to {@link RETRY_MAX_MS}). A store on a full disk failed every
   * commit at once, and the task was examined and run again at once: 74,593 tries and as many
   * error lines in 30 s, until the lease (whose renewals failed too) ran out.
   */
  private retryOrExamine(id: string): void {
    const n = this.failing.get(id);
    if (n === undefined) return this.markDirty(id);
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      this.markDirty(id);
    }, Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (n - 1)));
    this.retryTimers.add(timer);
  }

  /**
   * Arms the timer for the earliest sleeper of the driven sessions, from the rows this scheduler
   * saw (no read per step); a sleeper only another process wrote is found by the next poll.
   */
  private async armTimer(): Promise<void> {
    if (this.halted) return;
    let next: number | null = null;
    for (const { wakeAt } of this.sleepers.values()) if (next === null || wakeAt < next) next = wakeAt;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (next === null) return;
    const delay = Math.min(Math.max(0, next - this.d.clock.now()), 2 ** 31 - 1);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, delay);
  }
}
