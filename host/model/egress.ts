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
  /**
   * An allowed request's id: it is recorded when it starts (no `endedAt`) and the same row is
   * completed when its response ends, so a request in flight when its host died stays visible.
   * Absent on denials (recorded once, when refused) and on rows written before starts were kept.
   */
  id?: string | null;
  /** When the allowed exchange ended; null while in flight (or never seen to end: its host died). */
  endedAt?: number | null;
}

/** Where egress attempts are recorded; the store implements it. */
export interface EgressAuditRecords {
  recordEgress(attempt: EgressAttempt): Promise<void>;
  listEgress(filter?: { runId?: string; leaseId?: string }): Promise<EgressAttempt[]>;
}
