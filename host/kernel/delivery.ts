import { BerthError, type ErrorIds } from '../errors';

/**
 * What is known about an action that ended without a receipt:
 * - `not_sent`: the request provably never left (connection refused, name not resolved): not applied;
 * - `rejected`: the service answered and refused it: not applied;
 * - `unknown`: it may have been received (reset or timeout after writing, abort, host death).
 * Only the first two may be recorded `failed`; anything not classified is `unknown`.
 */
export type Delivery = 'not_sent' | 'rejected' | 'unknown';

/**
 * An error an action throws that says what is known about its delivery. `retryable` says whether
 * the same request may succeed later (a refused connection, a 503); it only matters for
 * `not_sent` and `rejected`, since an `unknown` action is verified or reconciled, never blindly repeated.
 */
export class ActionError extends BerthError {
  readonly delivery: Delivery;
  constructor(code: string, message: string, opts: { delivery: Delivery; retryable?: boolean; ids?: ErrorIds; details?: Record<string, unknown>; cause?: unknown }) {
    super(code, message, { ...opts, details: { ...opts.details, delivery: opts.delivery } });
    this.name = 'ActionError';
    this.delivery = opts.delivery;
  }
}

/** The request never reached the service (so it was not applied). */
export function notSent(message: string, opts: { code?: string; retryable?: boolean; cause?: unknown } = {}): ActionError {
  return new ActionError(opts.code ?? 'action_not_sent', message, { delivery: 'not_sent', retryable: opts.retryable ?? true, cause: opts.cause });
}

/** The service answered with a refusal (so it was not applied). */
export function rejected(message: string, opts: { code?: string; retryable?: boolean; details?: Record<string, unknown>; cause?: unknown } = {}): ActionError {
  return new ActionError(opts.code ?? 'action_rejected', message, { delivery: 'rejected', retryable: opts.retryable ?? false, details: opts.details, cause: opts.cause });
}

/** Re-types an error (keeping its code and message) with what is known about its delivery. */
export function withDelivery(err: unknown, delivery: Delivery, retryable?: boolean): ActionError {
  if (err instanceof ActionError && err.delivery === delivery && (retryable === undefined || err.retryable === retryable)) return err;
  const b = err instanceof BerthError ? err : null;
  const message = err instanceof Error ? err.message : String(err);
  return new ActionError(b?.code ?? 'action_failed', message, { delivery, retryable: retryable ?? b?.retryable ?? false, ids: b?.ids, details: b?.details, cause: err });
}

/** Connection errors that happen before a single byte of the request is written. */
const NEVER_LEFT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_NONAME',
  'EAI_FAIL',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * What an error thrown by `fetch` (undici) proves about delivery. `fetch` throws a bare
 * `TypeError('fetch failed')` for every transport failure; only the codes in its `cause` chain
 * (ECONNREFUSED, DNS failures, a connect timeout; for every address tried) prove the request
 * never left. A reset, a closed socket, a body or header timeout and an abort may all come after
 * the service read the request: `unknown`.
 */
export function classifyFetchError(err: unknown): Delivery {
  const codes = causeCodes(err);
  return codes.length > 0 && codes.every((c) => NEVER_LEFT.has(c)) ? 'not_sent' : 'unknown';
}

/** Error codes down the cause chain, each AggregateError (happy eyeballs: one per address) expanded; empty when any link has none. */
function causeCodes(err: unknown, depth = 0): string[] {
  if (!(err instanceof Error) || depth > 8) return [];
  if (err instanceof AggregateError) {
    const all = err.errors.map((e) => causeCodes(e, depth + 1));
    return all.length > 0 && all.every((c) => c.length > 0) ? all.flat() : [];
  }
  const code = (err as { code?: unknown }).code;
  if (err.cause !== undefined) {
    const inner = causeCodes(err.cause, depth + 1);
    if (inner.length) return inner;
  }
  return typeof code === 'string' ? [code] : [];
}

/**
 * The delivery an error from an action proves: the one an {@link ActionError} (or a BerthError
 * with `details.delivery`) states, else what a fetch error's causes prove, else `unknown`.
 */
export function deliveryOf(err: unknown): Delivery {
  if (err instanceof ActionError) return err.delivery;
  if (err instanceof BerthError) {
    const d = err.details?.delivery;
    if (d === 'not_sent' || d === 'rejected' || d === 'unknown') return d;
    return 'unknown';
  }
  return classifyFetchError(err);
}

/**
 * The error for an HTTP answer that is not a success: 4xx and 503 are refusals (not applied; 429
 * and 503 may succeed later); any other 5xx may come from a server that applied part of the
 * request, or a gateway that forwarded it: `unknown`.
 */
export function httpAnswerError(status: number, what: string, code = 'action_rejected'): ActionError {
  const message = `${what}: the service answered ${status}`;
  if (status >= 400 && status < 500) return rejected(message, { code, retryable: status === 429 || status === 408, details: { status } });
  if (status === 503) return rejected(message, { code, retryable: true, details: { status } });
  return new ActionError(code, message, { delivery: 'unknown', details: { status } });
}
