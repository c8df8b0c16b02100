import type { EgressAttempt } from '../model/egress';

export type { EgressAttempt, EgressAuditRecords } from '../model/egress';

/** True for a row of packets the network rules refused (its method is a protocol, not an HTTP method). */
export function isNetworkAttempt(a: Pick<EgressAttempt, 'method'>): boolean {
  return /^(TCP|UDP|ICMP|ICMPv6|SCTP|UDPLITE|\*|\d+)$/.test(a.method);
}

/** A run's egress as `berth show` reports it: totals (rows weighted by their count), every row, and drops per destination. */
export function summariseEgress(attempts: readonly EgressAttempt[]): {
  allowed: number;
  denied: number;
  attempts: EgressAttempt[];
  dropped: Array<{ proto: string; target: string; count: number }>;
} {
  const sum = (d: 'allow' | 'deny') => attempts.filter((a) => a.decision === d).reduce((n, a) => n + (a.count ?? 1), 0);
  const dropped = new Map<string, { proto: string; target: string; count: number }>();
  for (const a of attempts.filter(isNetworkAttempt)) {
    const k = `${a.method} ${a.target}`;
    const row = dropped.get(k) ?? dropped.set(k, { proto: a.method, target: a.target, count: 0 }).get(k)!;
    row.count += a.count ?? 1;
  }
  return { allowed: sum('allow'), denied: sum('deny'), attempts: [...attempts], dropped: [...dropped.values()].sort((x, y) => (x.target < y.target ? -1 : x.target > y.target ? 1 : 0)) };
}
