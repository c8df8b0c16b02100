import type { PhaseContext } from '../kernel';
import type { Task } from '../model';
import type { Store } from '../store';
import { ToolCallInputSchema, type ToolCallInput } from './agent-input';

/** Re-reads of the turn's calls when nothing in this process said something changed (a commit after a phase ended): the first, doubling to the last. */
const RECHECK_FIRST_MS = 50;
const RECHECK_MAX_MS = 2_000;
/** Bounds the memory of calls finished here whose results may not have committed yet. */
const FINISHED_KEPT = 4_096;

/**
 * The calls of one model turn take the sandbox in the model's order. They are separate tasks
 * created in one commit, and which reaches the sandbox first used to depend on their phases: a
 * call with a plan (`write_file`, `edit`) or an approval goes through `call` first, one without
 * starts in `execute`, so `[write_file a, exec "cat a"]` ran the `cat` before the write, by timing.
 *
 * A call waits, before any sandbox work (its plan or its run), for every earlier call of its turn
 * that is still live and not parked: `pending` or `running` in the store and not finished here.
 * An earlier call parked in a durable wait (an approval, a retry's backoff) does not hold the
 * later ones: the wait can last hours and holds nothing of the sandbox; it runs when it resumes.
 * The waits are in memory (one owner drives a session, so the calls it waits for run here) and
 * re-derived from the store after a restart. A waiter holds no phase slot while it waits
 * (`ctx.idle`): with seven calls and four slots, the later calls took every slot and the earlier
 * one, between its plan and its run, queued behind them.
 */
export class CallOrder {
  /** Tool tasks whose sandbox work ended here (their result may still be committing), with that result. */
  private readonly finished = new Map<string, unknown>();
  private readonly listeners = new Set<() => void>();

  /** `toolKind`: the tool task's kind, whose siblings of one turn are ordered. */
  constructor(
    private readonly store: Store,
    private readonly toolKind: string,
  ) {}

  /**
   * Runs a tool task's phase; its end wakes the waiters to look again. A decision that ends the
   * task (its result, or none) finishes the call: whatever it did in the sandbox is over.
   */
  async during<D extends { type: string }>(taskId: string, phase: () => Promise<D>): Promise<D> {
    try {
      const decision = await phase();
      if (decision.type === 'complete' || decision.type === 'fail' || decision.type === 'interrupt') this.finished.set(taskId, (decision as { result?: unknown }).result);
      return decision;
    } finally {
      if (this.finished.size > FINISHED_KEPT) {
        // Insertion order: the oldest are long committed (a turn's calls finish within its run).
        for (const id of [...this.finished.keys()].slice(0, FINISHED_KEPT / 2)) this.finished.delete(id);
      }
      this.changed();
    }
  }

  /**
   * The result a tool task's phase decided here, before its commit may have landed (the run's
   * budget counts a sibling's command time from it: run-budget.ts); undefined if none did.
   */
  finishedResult(taskId: string): unknown {
    return this.finished.get(taskId);
  }

  /**
   * Resolves once no earlier call of the turn is live and unfinished here; rejects when the
   * phase's signal aborts (a cancel, the host stopping).
   */
  async turn(ctx: Pick<PhaseContext, 'task' | 'signal' | 'idle'>, call: ToolCallInput): Promise<void> {
    const parentId = ctx.task.parentId;
    if (call.index === 0 || parentId === null) return;
    let recheckMs = RECHECK_FIRST_MS;
    for (;;) {
      ctx.signal.throwIfAborted();
      if ((await this.pendingBefore(parentId, call)).length === 0) return;
      const seen = await ctx.idle(this.change(ctx.signal, recheckMs));
      recheckMs = seen ? RECHECK_FIRST_MS : Math.min(recheckMs * 2, RECHECK_MAX_MS);
    }
  }

  private async pendingBefore(parentId: string, call: ToolCallInput): Promise<Task[]> {
    const live = await this.store.listTasks({ parentId, statuses: ['pending', 'running'] });
    return live.filter((t) => {
      if (t.kind !== this.toolKind || this.finished.has(t.id)) return false;
      const other = ToolCallInputSchema.safeParse(t.input);
      return other.success && other.data.turn === call.turn && other.data.index < call.index;
    });
  }

  private changed(): void {
    for (const l of [...this.listeners]) l();
  }

  /** True at the next change seen here, false when `ms` passed first; rejects on abort. */
  private change(signal: AbortSignal, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const off = () => {
        clearTimeout(timer);
        this.listeners.delete(seen);
        signal.removeEventListener('abort', aborted);
      };
      const seen = () => {
        off();
        resolve(true);
      };
      const aborted = () => {
        off();
        reject(signal.reason);
      };
      const timer = setTimeout(() => {
        off();
        resolve(false);
      }, ms);
      this.listeners.add(seen);
      signal.addEventListener('abort', aborted, { once: true });
    });
  }
}

