/** Ids that an error concerns; any subset may be present. */
export interface ErrorIds {
  sessionId?: string;
  runId?: string;
  taskId?: string;
  effectId?: string;
  leaseId?: string;
  containerId?: string;
  snapshotId?: string;
  documentId?: string;
  submissionId?: string;
}

/**
 * Base of every error Berth throws on purpose. `code` is stable and meant for
 * programs; `retryable` says whether the same call may succeed later unchanged.
 * Expected outcomes (non-zero exit, timeout, OOM, lost ownership) are values, not errors.
 */
export class BerthError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  readonly ids: ErrorIds;
  readonly details: Record<string, unknown> | undefined;

  constructor(
    code: string,
    message: string,
    opts: { retryable?: boolean; ids?: ErrorIds; details?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'BerthError';
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.ids = opts.ids ?? {};
    this.details = opts.details;
  }

  /** A plain object safe to print as JSON (no stack, no cause chain). */
  toJSON(): Record<string, unknown> {
    return { code: this.code, message: this.message, retryable: this.retryable, ids: this.ids, details: this.details };
  }
}

/** True when `err` is a BerthError with the given code. */
export function isBerthError(err: unknown, code?: string): err is BerthError {
  return err instanceof BerthError && (code === undefined || err.code === code);
}
