import type Database from 'better-sqlite3';
import { BerthError } from '../../errors';
import type { CommitInput, CommitResult } from '../commit-input';
import { Conflict } from '../commit-columns';
import { commitSteps, type Committed } from '../commit/commit-algorithm';
import type { MemberOutcome } from '../commit/group-commit';
import type { Statement, Step, Steps } from '../commit/transaction';
import { toTask } from './rows';
import { BUSY_TIMEOUT_MS } from './open';

/**
 * Runs the commit algorithm ({@link commitSteps}) on SQLite: synchronously, inside one BEGIN
 * IMMEDIATE transaction (better-sqlite3 transactions cannot await), each statement prepared once
 * per connection. A group of commits (host/store/commit/group-commit.ts) shares one transaction,
 * each member inside its own savepoint.
 */
export class CommitWriter {
  private readonly prepared = new Map<Statement, Database.Statement>();
  // Made once: better-sqlite3 builds a transaction function's wrappers at each db.transaction() call.
  private readonly write;
  private readonly writeGroup;

  /**
   * @param inGroup called inside the group's transaction after each member's writes, before the
   *   COMMIT; a test hook (the store passes the `batch:<label>` fault point).
   */
  constructor(
    private readonly db: Database.Database,
    private readonly inGroup?: (label: string) => void,
  ) {
    this.write = db.transaction((input: CommitInput, at: number) => this.drive(commitSteps(input, at, at)));
    // Called inside the group's transaction, `this.write` runs in a savepoint: a member that is
    // refused or throws is rolled back alone and the others stay.
    this.writeGroup = db.transaction((inputs: CommitInput[], at: number) =>
      inputs.map((input): MemberOutcome<CommitResult> => {
        let out: MemberOutcome<CommitResult>;
        try {
          out = { value: answer(this.write(input, at), at) };
        } catch (err) {
          if (err instanceof Conflict) out = { value: { ok: false, conflict: err.conflict } };
          // A refusal of this member (a BerthError) or a failed statement of its own: its
          // savepoint is rolled back and the transaction goes on. An error that ended the
          // transaction itself (disk full, I/O) fails the group.
          else if (err instanceof BerthError || this.db.inTransaction) out = { error: err };
          else throw err;
        }
        this.inGroup?.(input.label);
        return out;
      }),
    );
  }

  /**
   * One try of a group that does not wait for another process's write lock: `busy` when it is
   * held. The caller waits asynchronously and tries again, so this process's other work goes on
   * meanwhile; SQLite's own busy handler sleeps inside the call (up to 100 ms at a time), which
   * freezes the whole process, every session it drives included.
   */
  tryApplyGroup(inputs: CommitInput[], at: number): Array<MemberOutcome<CommitResult>> | 'busy' {
    this.db.pragma('busy_timeout = 0');
    try {
      return this.applyGroup(inputs, at);
    } catch (err) {
      if (isBusy(err)) return 'busy';
      throw err;
    } finally {
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  /**
   * Every member in one transaction (one fsync), each answered on its own. When the transaction
   * as a whole fails (not one member), each member is tried again alone, so each gets its own answer.
   * @param at the commit's time on the store's clock, which is also the database clock its fence is judged by.
   */
  applyGroup(inputs: CommitInput[], at: number): Array<MemberOutcome<CommitResult>> {
    try {
      return this.writeGroup.immediate(inputs, at);
    } catch (err) {
      if (isBusy(err) || inputs.length === 1) throw err;
      // Alone, each member waits for the write lock as any commit did before groups: a member
      // already written here must never be written again by a retry of the whole group.
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      return inputs.map((input) => {
        try {
          return { value: this.apply(input, at) };
        } catch (e) {
          return { error: e };
        }
      });
    }
  }

  /** One commit in its own transaction. */
  apply(input: CommitInput, at: number): CommitResult {
    try {
      return answer(this.write.immediate(input, at), at);
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

function answer({ seq, tasks }: Committed, at: number): CommitResult {
  return { ok: true, seq, at, tasks: tasks.map(toTask) };
}

function isBusy(err: unknown): boolean {
  return (err as { code?: string }).code === 'SQLITE_BUSY';
}
