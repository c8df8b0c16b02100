import type { MiddlewareHandler } from 'hono';
import { HOST_REFUSED_STATUS, hostAllowed, hostRefusal } from '../support/host-header';
import { refusal } from './api-errors';

/**
 * Refuses (421; JSON `host_refused` under /api, plain text elsewhere) every request whose Host header is not one of `allowed()`, before any
 * other check: a rebound name must get neither a page, nor its CSRF token, nor an action.
 * The rule itself is host/support/host-header.ts, shared with `berth mcp --http`.
 */
export function requireHost(allowed: () => ReadonlySet<string>, shown: () => string): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header('host');
    if (hostAllowed(host, allowed())) return next();
    return refusal(c, HOST_REFUSED_STATUS, 'host_refused', hostRefusal(host, shown(), 'berth serve'));
  };
}

/** An Origin header's host; one that is not a URL names no site, so it is no site of ours (it was a 500). */
export function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}
