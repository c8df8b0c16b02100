import { isBerthError } from '../errors';
import { scrub, scrubDeep, type ScrubSecret } from './scrub';

/**
 * Scrubs an error in place (message, stack, a BerthError's details, and its causes) and returns
 * it. In place, so its class, `code` and `retryable` survive: callers still branch on them, and
 * whatever records or logs the error (effect records, `phase threw` logs) sees no value.
 */
export function scrubError<E>(err: E, secrets: readonly ScrubSecret[]): E {
  if (secrets.length === 0) return err;
  const seen = new Set<unknown>();
  let at: unknown = err;
  while (at instanceof Error && !seen.has(at)) {
    seen.add(at);
    at.message = scrub(at.message, secrets);
    if (at.stack) at.stack = scrub(at.stack, secrets);
    if (isBerthError(at) && at.details) (at as { details: unknown }).details = scrubDeep(at.details, secrets);
    at = at.cause;
  }
  return err;
}
