import { createHash } from 'node:crypto';

/** One statement of the commit in both dialects; `pgName` names its PostgreSQL prepared statement. */
export interface Statement {
  readonly sqlite: string;
  readonly postgres: string;
  readonly pgName: string;
}

/** The prepared-statement name of a PostgreSQL text: derived from the text, so equal texts share one plan per connection. */
export const pgStatementName = (text: string): string => `b_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;

/** A statement of both dialects, given side by side. */
export const statement = (sqlite: string, postgres: string): Statement => ({ sqlite, postgres, pgName: pgStatementName(postgres) });

/**
 * What the commit algorithm asks of its transaction, one statement at a time. `get` answers the
 * first row (or undefined), `all` every row, `run` how many rows it changed; `exec` answers
 * nothing, so a driver may send it without waiting (PostgreSQL pipelines it and reports its
 * failure at the next answer or the COMMIT). `mid` marks the point after the first writes where
 * a test may kill the connection (PostgreSQL's `mid:<label>` fault point).
 */
export type Step = { op: 'get' | 'all' | 'run' | 'exec'; stmt: Statement; args: unknown[] } | { op: 'mid' };

/** The algorithm's side of a step: the generator it is written as yields steps and receives their answers. */
export type Steps<T> = Generator<Step, T, unknown>;

// A driver answers each step with the result its op promises (see Step); these helpers give the
// algorithm that result typed, so the one cast of each kind lives here.

export function* get<T extends object>(stmt: Statement, args: unknown[]): Steps<T | undefined> {
  return (yield { op: 'get', stmt, args }) as T | undefined;
}

export function* all<T extends object>(stmt: Statement, args: unknown[]): Steps<T[]> {
  return (yield { op: 'all', stmt, args }) as T[];
}

export function* run(stmt: Statement, args: unknown[]): Steps<number> {
  return (yield { op: 'run', stmt, args }) as number;
}

export function* exec(stmt: Statement, args: unknown[]): Steps<void> {
  yield { op: 'exec', stmt, args };
}

export function* mid(): Steps<void> {
  yield { op: 'mid' };
}
