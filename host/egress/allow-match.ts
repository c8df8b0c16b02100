import { isIP } from 'node:net';

/** One compiled `host:port` allow pattern. */
export interface AllowRule {
  /** Lowercase host; for a wildcard, the suffix after `*.`. */
  host: string;
  wildcard: boolean;
  port: number;
  pattern: string;
}

/** Compiles manifest patterns (`api.example.com:443`, `*.example.org:8080`) once, at the edge. */
export function compileAllow(patterns: readonly string[]): AllowRule[] {
  return patterns.map((pattern) => {
    const i = pattern.lastIndexOf(':');
    const name = pattern.slice(0, i).toLowerCase();
    const wildcard = name.startsWith('*.');
    return { host: wildcard ? name.slice(2) : name, wildcard, port: Number(pattern.slice(i + 1)), pattern };
  });
}

/** A target name as the proxy compares it: lowercase, no trailing dot, no IPv6 brackets. */
export function normaliseHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '').replace(/^\[(.*)\]$/, '$1');
}

/**
 * The rule that allows `host:port`, or undefined. A wildcard matches names strictly below its
 * suffix (`*.example.org` is not `example.org`), and never an IP literal: an address is allowed
 * only when a rule lists exactly that address.
 */
export function matchAllow(rules: readonly AllowRule[], rawHost: string, port: number): AllowRule | undefined {
  const host = normaliseHost(rawHost);
  const ip = isIP(host) !== 0;
  return rules.find((r) => r.port === port && (r.wildcard ? !ip && host.endsWith(`.${r.host}`) : r.host === host));
}
