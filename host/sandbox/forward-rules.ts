import { readFileSync } from 'node:fs';
import type { BlockedRange } from '../../environment';
import { DROP_PREFIX } from './drop-log';

export type RuleTool = 'iptables' | 'ip6tables';
/** One rule: the tool and its match and target, without chain and tag. */
export type Rule = [RuleTool, string[]];

/** A host address and TCP port a sandbox may open connections to. */
export interface HostOpening {
  address: string;
  port: number;
}

/** A LOG rule's rate bound per lease and rule: enough to see every attempt of a probing step, never a flood in the kernel log. */
export const LOG_LIMIT = ['-m', 'limit', '--limit', '20/sec', '--limit-burst', '40'];
const LOG = [...LOG_LIMIT, '-j', 'LOG', '--log-prefix', DROP_PREFIX.drop];

/** Out-interfaces of Docker's bridges (the default one and user networks): other containers. */
const DOCKER_BRIDGES = ['docker+', 'br-+'];

/**
 * The forwarding rules of one sandbox bridge, in insertion order for `-I` (the first ends lowest).
 * Each refusal is preceded by a LOG rule (prefix `berth-drop`), so the attempt is counted from the
 * kernel log: Docker's own isolation chains drop silently, which is how direct attempts out of an
 * allowlist sandbox used to leave no trace (its internal network still gives the container a default
 * route on this engine, so the packets did leave the container).
 *
 * - `allowlist`: everything the sandbox sends to be forwarded is refused at once with
 *   "network unreachable" (its only way out is the proxy on the gateway, which is INPUT).
 * - `open`: destinations in `blocked` ranges and on other Docker bridges are dropped, except the
 *   listed `openings` and the host's `resolvers` on port 53 (UDP and TCP), which go on to Docker's
 *   chains (RETURN, so Docker's isolation still applies). A packet a published port redirected
 *   (conntrack DNAT) is left to Docker's rules: it was addressed to the host, not to a container.
 */
export function forwardingRules(bridge: string, o: { mode: 'allowlist' } | { mode: 'open'; blocked: readonly BlockedRange[]; openings: readonly HostOpening[]; resolvers: readonly string[] }): Rule[] {
  const from = ['-i', bridge];
  if (o.mode === 'allowlist') {
    return [
      ['iptables', [...from, '-j', 'REJECT', '--reject-with', 'icmp-net-unreachable']],
      ['iptables', [...from, ...LOG]],
    ];
  }
  const toContainers = (out: string) => [...from, '-o', out, '-m', 'conntrack', '!', '--ctstate', 'DNAT'];
  return [
    ...DOCKER_BRIDGES.flatMap((out): Rule[] => [
      ['iptables', [...toContainers(out), '-j', 'DROP']],
      ['iptables', [...toContainers(out), ...LOG]],
    ]),
    ...o.blocked.flatMap((r): Rule[] => [
      ['iptables', [...from, '-d', r.cidr, '-j', 'DROP']],
      ['iptables', [...from, '-d', r.cidr, ...LOG]],
    ]),
    ...o.openings.map((x): Rule => ['iptables', [...from, '-d', x.address, '-p', 'tcp', '--dport', String(x.port), '-j', 'RETURN']]),
    ...o.resolvers.flatMap((r) => ['udp', 'tcp'].map((p): Rule => ['iptables', [...from, '-d', r, '-p', p, '--dport', '53', '-j', 'RETURN']])),
    // Its own bridge is not another network (a hairpin back to itself).
    ['iptables', [...from, '-o', bridge, '-j', 'RETURN']],
  ];
}

const IPV4 = /^(\d{1,3})\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** The IPv4 `nameserver` addresses of a resolv.conf text, in order. */
export function nameservers(resolvConf: string): string[] {
  return [...resolvConf.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => m[1]!).filter((a) => IPV4.test(a));
}

/**
 * The resolvers a sandbox's DNS goes to in open mode: Docker's embedded DNS (127.0.0.11 in the
 * container) forwards, from the container's own network namespace, to the host's nameservers, so
 * these packets cross the sandbox's forwarding rules like any other. They are the host's
 * `/etc/resolv.conf`, without loopback ones (which Docker replaces: with systemd-resolved's upstream
 * list, `/run/systemd/resolve/resolv.conf`, when that is all there is).
 */
export function hostResolvers(read: (path: string) => string = (p) => readFileSync(p, 'utf8')): string[] {
  const tryRead = (p: string) => {
    try {
      return nameservers(read(p));
    } catch {
      return [];
    }
  };
  const listed = tryRead('/etc/resolv.conf');
  const outside = listed.filter((a) => !a.startsWith('127.'));
  if (outside.length > 0 || listed.length === 0) return outside;
  return tryRead('/run/systemd/resolve/resolv.conf').filter((a) => !a.startsWith('127.'));
}
