import { BerthError, type ErrorIds } from '../errors';

/** The shape dockerode gives its HTTP errors. */
interface EngineHttpError {
  statusCode?: number;
  code?: string;
  message?: string;
}

const asHttp = (err: unknown): EngineHttpError => (typeof err === 'object' && err !== null ? (err as EngineHttpError) : {});

export function isNotFound(err: unknown): boolean {
  return asHttp(err).statusCode === 404;
}

export function isConflict(err: unknown): boolean {
  return asHttp(err).statusCode === 409;
}

/**
 * The engine is removing the container already: another process asked first (two berth processes
 * of one store sweeping at once). That process removes it and records its sweep.
 */
export function isRemovalInProgress(err: unknown): boolean {
  const e = asHttp(err) as EngineHttpError & { json?: { message?: string } };
  return e.statusCode === 409 && /removal of container .* is already in progress/.test(`${e.message ?? ''} ${e.json?.message ?? ''}`);
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND']);

/** True when the error says the engine could not be talked to at all (not that it refused). */
export function isEngineUnreachable(err: unknown): boolean {
  const e = asHttp(err);
  return e.statusCode === undefined && e.code !== undefined && UNREACHABLE.has(e.code);
}

/** Where the connection was tried, as Node's socket error names it (a socket path, or host and port). */
function unreachableAt(err: unknown): string {
  const { address, port } = err as { address?: unknown; port?: unknown };
  if (typeof address !== 'string') return '';
  return typeof port === 'number' ? ` at ${address}:${port}` : ` at ${address}`;
}

/** What a user can do about it: said once, where the code means one thing. */
const UNREACHABLE_HINT: Record<string, string> = {
  ENOENT: ': no socket there; is dockerd running, and is DOCKER_HOST right?',
  ECONNREFUSED: ': nothing listens there; is dockerd running, and is DOCKER_HOST right?',
  EACCES: ': permission denied; run as a user that may use the Docker socket (the docker group) or as root',
};

/**
 * Wraps an unexpected engine failure in a typed error. Unreachable engines are retryable: the same
 * call may work once the daemon is back.
 */
export function engineError(action: string, err: unknown, ids: ErrorIds = {}): BerthError {
  if (err instanceof BerthError) return err;
  const e = asHttp(err);
  if (isEngineUnreachable(err)) {
    return new BerthError('engine_unreachable', `${action}: Docker engine unreachable${unreachableAt(err)} (${e.code})${UNREACHABLE_HINT[e.code!] ?? ''}`, { retryable: true, ids, cause: err });
  }
  return new BerthError('engine_error', `${action}: ${e.message ?? String(err)}`, {
    retryable: e.statusCode !== undefined && e.statusCode >= 500,
    ids,
    details: e.statusCode === undefined ? undefined : { statusCode: e.statusCode },
    cause: err,
  });
}
