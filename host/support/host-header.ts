import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * The one Host rule of Berth's loopback servers (`berth serve`, `berth mcp --http`). Whoever
 * controls a DNS name can point it at 127.0.0.1 (DNS rebinding): the browser then sends that name
 * as Host, and a page of that site could read and drive the loopback server, token or not. So a
 * request is answered only when its Host names this server.
 */

/** Misdirected Request: the request reached a server that does not answer for the name it gave. */
export const HOST_REFUSED_STATUS = 421;

const WILDCARD = new Set(['0.0.0.0', '::', '']);

/** `host` as it appears in a Host header: an IPv6 literal in brackets, lower case. */
const asAuthority = (host: string) => (isIP(host) === 6 ? `[${host}]` : host).toLowerCase();

/**
 * The Host header values a server bound to `bound`:`port` answers: the bound address and
 * `localhost`, `127.0.0.1`, `[::1]`, each with the port (without it too on port 80, where browsers
 * leave it out). A wildcard bind (`0.0.0.0`, `::`) is bound to every address of this machine, so
 * each interface address counts as bound; a name never does unless it was given as the host.
 */
export function allowedHosts(bound: string, port: number, interfaces = networkInterfaces()): Set<string> {
  const names = new Set(['localhost', '127.0.0.1', '[::1]', normalHost(asAuthority(bound)) ?? asAuthority(bound)]);
  if (WILDCARD.has(bound)) for (const list of Object.values(interfaces)) for (const a of list ?? []) names.add(asAuthority(a.address.replace(/%.*$/, '')));
  names.delete('');
  names.delete('[]');
  const out = new Set<string>();
  for (const n of names) {
    out.add(`${n}:${port}`);
    if (port === 80) out.add(n);
  }
  return out;
}

// A name or IPv4 address, or a bracketed IPv6 literal, and an optional port: nothing else is a Host.
const HOST_SHAPE = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(:\d{1,5})?$/;

/**
 * A Host header in the form `allowedHosts` lists, or null when it is not a host at all. Names are
 * case-insensitive (RFC 3986: `LOCALHOST:7777` is `localhost:7777`), and an IPv6 literal may be
 * written many ways (`[0:0::1]` is `[::1]`), so both are brought to one spelling first.
 */
export function normalHost(header: string | undefined): string | null {
  const h = (header ?? '').trim().toLowerCase();
  const m = HOST_SHAPE.exec(h);
  if (!m) return null;
  if (!m[1]!.startsWith('[')) return h;
  const inner = m[1]!.slice(1, -1);
  if (isIP(inner) !== 6) return null;
  // The URL parser writes an IPv6 literal in its one canonical form (RFC 5952).
  return `${new URL(`http://[${inner}]/`).hostname}${m[2] ?? ''}`;
}

/** True when the Host header names a server that answers `allowed`. */
export const hostAllowed = (header: string | undefined, allowed: ReadonlySet<string>): boolean => {
  const h = normalHost(header);
  return h !== null && allowed.has(h);
};

/** Why a request was refused, naming the Host it gave (cut short: it is the client's text) and the server's address. */
export function hostRefusal(header: string | undefined, server: string, what: string): string {
  const named = !header ? 'no Host header' : `Host ${JSON.stringify(header.slice(0, 100))}`;
  return `this is ${what} at ${server}; a request with ${named} is refused (use ${server}, or localhost with its port)`;
}
