import { BerthError } from '../errors';

/**
 * `--port`: a whole number 0-65535 (0: any free port, printed once listening); `fallback` when
 * absent. Out of range was an internal error from the server's listen.
 */
export function portFlag(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const port = /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(port >= 0 && port <= 65_535)) throw new BerthError('usage', `--port expects a port number from 0 (any free port) to 65535, found "${value}"`);
  return port;
}
