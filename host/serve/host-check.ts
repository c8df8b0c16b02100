import type { MiddlewareHandler } from 'hono';
import { HOST_REFUSED_STATUS, hostAllowed, hostRefusal } from '../support/host-header';

/**
 * Refuses (421, plain text) every request whose Host header is not one of `allowed()`, before any
 * other check: a rebound name must get neither a page, nor its CSRF token, nor an action.
 * The rule itself is host/support/host-header.ts, shared with `berth mcp --http`.
 */
export function requireHost(allowed: () => ReadonlySet<string>, shown: () => string): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header('host');
    if (hostAllowed(host, allowed())) return next();
    return c.text(`${HOST_REFUSED_STATUS}: ${hostRefusal(host, shown(), 'berth serve')}`, HOST_REFUSED_STATUS);
  };
}
