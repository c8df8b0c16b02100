import type { Task } from '../model';
import type { CommitInput, CommitResult } from '../store';

interface Kept {
  /** The epoch of this kernel's claim the rows were committed under. */
  epoch: number;
  /** The session's sequence number at which every kept row is exact. */
  seq: number;
  tasks: Map<string, Task>;
  /** Ids of kept rows that are terminal, oldest first: only the newest {@link TERMINAL_KEPT} stay. */
  ended: string[];
}

/**
 * Terminal rows kept per session. A terminal task never runs again; its row is read at most once
 * more (the examination after its last commit, its parent's wait), soon after it ended. Keeping
 * every one made a run's memory grow with its length (a plan step is a task).
 */
const TERMINAL_KEPT = 64;

/**
 * The task rows of each session this kernel drives, as its own commits left them, so that a phase
 * step costs its commit and no read (on PostgreSQL every read is a network round trip).
 *
 * The rule that keeps them true: a row is trusted only while every commit of its session since the
 * row was written is this kernel's own, under the same epoch. Each commit of a session is numbered
 * (its per-session `seq`); a commit of ours that comes back with any number but the one after the
 * last we kept means someone else committed in between (an operator's unfenced decision, a program
 * writing to the store, another host after a take-over), and the session's rows are forgotten and
 * read again. So are they when a commit is refused or its outcome is unknown, when the claim is
 * lost or renewed under a new epoch, and when a read of the store shows a row that differs from
 * the kept one. Rows enter only from a commit's own answer (`CommitResult.tasks`, read inside its
 * transaction), never from a read whose moment in the session's sequence is unknown.
 *
 * What this does not see until this kernel's next commit or poll is a commit by another writer
 * that landed after its last one; every decision taken from a kept row is still a compare-and-set
 * commit fenced by the epoch, so a stale row can waste a phase, never advance state another host
 * owns.
 */
export class SessionRows {
  private readonly sessions = new Map<string, Kept>();
  private readonly sessionOf = new Map<string, string>();

  constructor(
    /** The epoch under which this kernel holds the session now, if it does. */
    private readonly epochOf: (sessionId: string) => number | undefined,
  ) {}

  /** The kept row of a task, when its session is held under the epoch that wrote it; else undefined (read the store). */
  task(taskId: string): Task | undefined {
    const sessionId = this.sessionOf.get(taskId);
    if (sessionId === undefined) return undefined;
    const kept = this.sessions.get(sessionId);
    if (!kept || this.epochOf(sessionId) !== kept.epoch) return undefined;
    return kept.tasks.get(taskId);
  }

  /**
   * After each commit of this kernel: a commit that follows the kept sequence keeps the session's
   * rows and adds what it wrote; anything else starts again from what it wrote (exact at its
   * sequence whatever happened before) or forgets the session.
   */
  committed(input: CommitInput, epoch: number | undefined, result: CommitResult): void {
    const sid = input.sessionId;
    if (!result.ok || epoch === undefined) return this.forget(sid);
    const kept = this.sessions.get(sid);
    // Two commits of ours may answer out of order: an older answer than what is kept says nothing
    // about the rows the newer one left, so nothing is kept until the next commit.
    if (kept && result.seq <= kept.seq) return this.forget(sid);
    const follows = kept !== undefined && kept.epoch === epoch && kept.seq === result.seq - 1;
    const tasks = follows ? kept.tasks : new Map<string, Task>();
    const ended = follows ? kept.ended : [];
    if (!follows) this.forget(sid);
    for (const id of input.cancelTasks ?? []) {
      const row = tasks.get(id);
      if (row) tasks.set(id, { ...row, cancelRequested: true, updatedAt: result.at });
      // A task of another session cancelled from here: that session's rows no longer hold.
      else if (this.sessionOf.has(id) && this.sessionOf.get(id) !== sid) this.forget(this.sessionOf.get(id)!);
    }
    for (const t of result.tasks ?? []) {
      if (t.sessionId !== sid) {
        this.forget(t.sessionId);
        continue;
      }
      tasks.set(t.id, t);
      this.sessionOf.set(t.id, sid);
      if (t.status === 'terminal') ended.push(t.id);
    }
    // The oldest ended rows go; a store read answers for them from now on.
    while (ended.length > TERMINAL_KEPT) {
      const id = ended.shift()!;
      if (tasks.get(id)?.status !== 'terminal') continue;
      tasks.delete(id);
      this.sessionOf.delete(id);
    }
    this.sessions.set(sid, { epoch, seq: result.seq, tasks, ended });
  }

  /**
   * A row just read from the store: when it differs from the kept one (another writer, or a read
   * that raced a commit of ours), the session's rows are forgotten.
   */
  observed(task: Task): void {
    const kept = this.task(task.id);
    if (kept && (kept.version !== task.version || kept.cancelRequested !== task.cancelRequested || kept.status !== task.status)) this.forget(task.sessionId);
  }

  /** How much is kept: the sessions and the task rows of all of them. */
  size(): { sessions: number; tasks: number } {
    return { sessions: this.sessions.size, tasks: this.sessionOf.size };
  }

  /** Reads the session again from now on (a claim, a loss, a commit whose outcome is unknown). */
  forget(sessionId: string): void {
    const kept = this.sessions.get(sessionId);
    if (!kept) return;
    this.sessions.delete(sessionId);
    for (const id of kept.tasks.keys()) this.sessionOf.delete(id);
  }
}
