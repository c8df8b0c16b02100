import type Database from 'better-sqlite3';
import type { CommitInput, CommitResult } from '../commit-input';
import { Conflict } from '../commit-columns';
import { commitSteps } from '../commit/commit-algorithm';
import type { Statement, Step, Steps } from '../commit/transaction';
import { toTask } from './rows';
import { taskInputsById } from './reads';
import { TaskInputs } from '../task-inputs';
import { BUSY_TIMEOUT_MS } from './open';

/**
 * Runs the commit algorithm ({@link commitSteps}) on SQLite: synchronously, inside one BEGIN
 * IMMEDIATE transaction (better-sqlite3 transactions cannot await), each statement prepared once
 * per connection. The commit is applied (visible to every reader) when the call returns.
 */
export class CommitWriter {
  private readonly prepared = new Map<Statement, Database.Statement>();
  // Made once: better-sqlite3 builds a transaction function's wrappers at each db.transaction() call.
  private readonly write;

  /**
   * @param unflushed runs each commit's transaction without its own flush to disk (the store answers
   *   its caller after a flush shared with the commits applied beside it: shared-sync.ts).
   * @param own `db` is a connection of the writer's own (commit-connection.ts): it never waits for
   *   a lock unless asked to (busy_timeout 0) and is set up once for how it writes, so no commit
   *   switches a pragma back and forth (each switch prepares a statement).
   */
  constructor(
    private readonly db: Database.Database,
    private readonly unflushed: <T>(write: () => T) => T = (write) => write(),
    private readonly own = false,
    /** The store's cache of large task inputs, shared with its reads (task-inputs.ts). */
    private readonly inputs = new TaskInputs(),
  ) {
    this.write = db.transaction((input: CommitInput, at: number) => this.drive(commitSteps(input, at, at)));
  }

  /**
   * One try that does not wait for another process's write lock: `busy` when it is held. The
   * caller waits asynchronously and tries again, so this process's other work goes on meanwhile;
   * SQLite's own busy handler sleeps inside the call (up to 100 ms at a time), which freezes the
   * whole process, every session it drives included.
   */
  tryApply(input: CommitInput, at: number): CommitResult | 'busy' {
    if (!this.own) this.db.pragma('busy_timeout = 0');
    try {
      return this.applyNow(input, at);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_BUSY') return 'busy';
      throw err;
    } finally {
      if (!this.own) this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  /**
   * Applies the commit, waiting in SQLite's busy handler for another process's write lock (up to
   * BUSY_TIMEOUT_MS, then `database is locked`).
   * @param at the commit's time on the store's clock, which is also the database clock its fence is judged by.
   */
  apply(input: CommitInput, at: number): CommitResult {
    if (!this.own) return this.applyNow(input, at);
    this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    try {
      return this.applyNow(input, at);
    } finally {
      this.db.pragma('busy_timeout = 0');
    }
  }

  private applyNow(input: CommitInput, at: number): CommitResult {
    try {
      const { seq, tasks } = this.unflushed(() => this.write.immediate(input, at));
      return { ok: true, seq, at, tasks: this.inputs.fill(tasks, (ids) => taskInputsById(this.db, ids)).map(toTask) };
    } catch (err) {
      if (err instanceof Conflict) return { ok: false, conflict: err.conflict };
      throw err;
    }
  }

  private drive<T>(steps: Steps<T>): T {
    let next = steps.next();
    while (!next.done) next = steps.next(this.answer(next.value));
    return next.value;
  }

  private answer(step: Step): unknown {
    if (step.op === 'mid') return undefined;
    let stmt = this.prepared.get(step.stmt);
    if (!stmt) {
      stmt = this.db.prepare(step.stmt.sqlite);
      this.prepared.set(step.stmt, stmt);
    }
    switch (step.op) {
      case 'get':
        return stmt.get(...step.args);
      case 'all':
        return stmt.all(...step.args);
      case 'run':
        return stmt.run(...step.args).changes;
      case 'exec':
        stmt.run(...step.args);
        return undefined;
    }
  }
}
