/** One egress attempt as the proxy saw it; stored and reported on the run. */
export interface EgressAttempt {
  at: number;
  runId: string | null;
  leaseId: string | null;
  /** `CONNECT` for tunnels, the HTTP method for forwarded requests. */
  method: string;
  /** `host:port` as the sandbox asked for it. */
  target: string;
  decision: 'allow' | 'deny';
  /** Why a request was denied, or the rule that allowed it. */
  reason: string;
  bytesOut: number;
  bytesIn: number;
  /**
   * How many attempts the row stands for: 1 for what the proxy saw; for packets the sandbox's
   * network rules refused (`method` is then the protocol, `TCP`, `UDP`, ...), the distinct
   * connection attempts to that target in one recording window.
   */
  count: number;
}

/** Where egress attempts are recorded; the store implements it. */
export interface EgressAuditRecords {
  recordEgress(attempt: EgressAttempt): Promise<void>;
  listEgress(filter?: { runId?: string; leaseId?: string }): Promise<EgressAttempt[]>;
}

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
