import { BerthError } from '../../errors';
import { BUSY_TIMEOUT_MS } from './open';

/**
 * SQLite's `database is locked` (SQLITE_BUSY after the busy timeout) as a typed, retryable error
 * naming the store: another process held the file's write lock all that time, which a host frozen
 * in the middle of a write (SIGSTOP, a suspended VM) or a program with a transaction left open
 * does. Untyped, it reached the operator as `internal_error: database is locked`, not retryable,
 * naming neither the store nor what holds it. Any other error is returned as it is.
 */
export function typedBusy(path: string, err: unknown): unknown {
  if ((err as { code?: unknown } | null)?.code !== 'SQLITE_BUSY') return err;
  return new BerthError(
    'store_busy',
    `the store ${path} is locked: another process has held its write lock for over ${BUSY_TIMEOUT_MS / 1000} s ` +
      '(a host stopped in the middle of a write, by SIGSTOP or a suspended VM, or a program with a transaction open); ' +
      'nothing was written: try again once it lets go',
    { retryable: true, cause: err, details: { path } },
  );
}
