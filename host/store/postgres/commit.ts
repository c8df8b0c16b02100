import type pg from 'pg';
import { BerthError } from '../../errors';
import type { CommitInput, CommitResult } from '../commit-input';
import { Conflict } from '../commit-columns';
import { commitSteps } from '../commit/commit-algorithm';
import type { Step, Steps } from '../commit/transaction';
import type { DbClock } from '../sqlite/ownership';
import { RETRY_CODES, storeError, type Row } from './open';
import { toTask } from './rows';
import { taskInputsById } from './reads';
import { TaskInputs } from '../task-inputs';

const ATTEMPTS = 5;

/**
 * Runs the commit algorithm ({@link commitSteps}) on PostgreSQL: one transaction on one pooled
 * connection, every statement a named prepared statement. Connections run in pg's pipeline mode:
 * BEGIN goes out with the first statement, a statement whose answer the algorithm does not need
 * (an insert) goes out without waiting for it, and the last ones go out with the COMMIT, so a
 * typical step commit costs three round trips (session lock and fence; task compare-and-set;
 * the rest with COMMIT). Deadlocks and serialization failures between hosts are retried here; a
 * lost connection is a retryable `store_unavailable` (the server rolled the transaction back, or
 * the COMMIT's fate is unknown and the caller re-reads, as after a crash).
 */
export class CommitWriter {
  /**
   * @param midCommit called after the first writes and before the rest; a test hook (the
   *   PostgreSQL store passes a fault point) so a connection can be killed inside a transaction.
   * @param dbClock replaces the server's clock for the fence's lease (tests that step time).
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly midCommit: (label: string) => void | Promise<void> = () => {},
    private readonly dbClock?: DbClock,
    /** The store's cache of large task inputs, shared with its reads (task-inputs.ts). */
    private readonly inputs = new TaskInputs(),
  ) {}

  async apply(input: CommitInput, at: number): Promise<CommitResult> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        throw storeError(err);
      }
      let broken: Error | undefined;
      let committed: { seq: number; tasks: Row[] };
      try {
        const tx = new Pipeline(client);
        tx.send('BEGIN');
        const { seq, tasks } = await this.drive(tx, commitSteps(input, at, this.dbClock ? this.dbClock() : null), input.label);
        // Every write still in flight travels with the COMMIT. COMMIT of a transaction that a
        // write aborted answers ROLLBACK without an error, so each write's own answer is checked.
        const commit = client.query('COMMIT');
        commit.catch(() => {});
        await tx.settled();
        await commit;
        committed = { seq, tasks };
      } catch (err) {
        await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        if (err instanceof Conflict) return { ok: false, conflict: err.conflict };
        const sqlstate = err instanceof BerthError ? String(err.details?.sqlstate ?? '') : ((err as { code?: string }).code ?? '');
        if (RETRY_CODES.has(sqlstate) && attempt < ATTEMPTS) continue;
        throw storeError(err);
      } finally {
        client.release(broken);
      }
      // After the commit, outside its error handling: a failed read here must not look like a
      // commit that may be retried. The inputs the rows left out are read back (task-inputs.ts).
      return { ok: true, seq: committed.seq, at, tasks: (await this.inputs.fillAsync(committed.tasks, (ids) => taskInputsById(this.pool, ids))).map(toTask) };
    }
  }

  private async drive<T>(tx: Pipeline, steps: Steps<T>, label: string): Promise<T> {
    let next = steps.next();
    while (!next.done) {
      const step: Step = next.value;
      let answer: unknown;
      if (step.op === 'mid') {
        // The first writes reach the server before the hook may kill the connection.
        await tx.settled();
        await this.midCommit(label);
      } else if (step.op === 'exec') {
        tx.send(step.stmt.postgres, step.stmt.pgName, step.args);
      } else {
        const res = await tx.answer(step.stmt.postgres, step.stmt.pgName, step.args);
        answer = step.op === 'get' ? res.rows[0] : step.op === 'all' ? res.rows : (res.rowCount ?? 0);
      }
      next = steps.next(answer);
    }
    return next.value;
  }
}

/**
 * Statements of one transaction on a pipelined connection. Answers come back in the order sent,
 * so the first failure is the first rejected promise in `inFlight`: later statements of the
 * aborted transaction fail only with 25P02 ("current transaction is aborted"), which would hide it.
 */
class Pipeline {
  private inFlight: Array<Promise<unknown>> = [];

  constructor(private readonly client: pg.PoolClient) {}

  send(text: string, name?: string, values?: unknown[]): void {
    const p = name ? this.client.query({ name, text, values }) : this.client.query(text);
    p.catch(() => {}); // observed by settled() or a later answer(); never an unhandled rejection
    this.inFlight.push(p);
  }

  /** Waits for everything sent so far; throws the first failure. */
  async settled(): Promise<void> {
    const sent = this.inFlight;
    this.inFlight = [];
    for (const p of sent) await p;
  }

  async answer(text: string, name: string, values: unknown[]): Promise<pg.QueryResult> {
    const p = this.client.query({ name, text, values });
    p.catch(() => {});
    await this.settled();
    return p;
  }
}
