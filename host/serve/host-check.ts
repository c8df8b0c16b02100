import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { MiddlewareHandler } from 'hono';

const WILDCARD = new Set(['0.0.0.0', '::', '']);

/** `host` as it appears in a Host header: an IPv6 literal in brackets, lower case. */
const asAuthority = (host: string) => (isIP(host) === 6 ? `[${host}]` : host).toLowerCase();

/**
 * The Host header values a server bound to `bound`:`port` answers: the bound address and
 * `localhost`, `127.0.0.1`, `[::1]`, each with the port (without it too on port 80, where browsers
 * leave it out). A wildcard bind (`0.0.0.0`, `::`) is bound to every address of this machine, so
 * each interface address counts as bound; a name never does unless it was given as `--host`.
 * Whoever controls a DNS name can point it at 127.0.0.1 (DNS rebinding): the browser then sends that
 * name as Host, and a page of that site could read and drive the loopback server, token or not.
 */
export function allowedHosts(bound: string, port: number, interfaces = networkInterfaces()): Set<string> {
  const names = new Set(['localhost', '127.0.0.1', '[::1]', asAuthority(bound)]);
  if (WILDCARD.has(bound)) for (const list of Object.values(interfaces)) for (const a of list ?? []) names.add(asAuthority(a.address.replace(/%.*$/, '')));
  names.delete('');
  const out = new Set<string>();
  for (const n of names) {
    out.add(`${n}:${port}`);
    if (port === 80) out.add(n);
  }
  return out;
}

/**
 * Refuses (421, plain text) every request whose Host header is not one of `allowed()`, before any
 * other check: a rebound name must get neither a page, nor its CSRF token, nor an action.
 */
export function requireHost(allowed: () => ReadonlySet<string>, shown: () => string): MiddlewareHandler {
  return async (c, next) => {
    const host = (c.req.header('host') ?? '').toLowerCase();
    if (allowed().has(host)) return next();
    const named = host === '' ? 'no Host header' : `Host ${JSON.stringify(host.slice(0, 100))}`;
    return c.text(`421: this is berth serve at ${shown()}; a request with ${named} is refused (open ${shown()}, or localhost with its port)`, 421);
  };
}
