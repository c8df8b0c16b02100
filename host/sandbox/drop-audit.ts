import type { DropLine } from './drop-log';

/** Packets the sandbox's rules refused, per source, destination and port, over one flush window. */
export interface DroppedAttempt {
  /** `TCP`, `UDP`, `ICMP`, ... as the kernel names it. */
  proto: string;
  /** `address:port` the packets were sent to. */
  target: string;
  /** Source address: the sandbox itself, or (for its proxy) whoever tried to use it. */
  from: string;
  /** Distinct connection attempts (a retransmitted SYN is the same attempt). */
  count: number;
  firstAt: number;
  lastAt: number;
  reason: string;
}

/** Distinct destinations kept per lease per window; the rest are summed into one `*` row. */
const MAX_ROWS = 50;
/** How long a connection tuple counts as one attempt: longer than a SYN's retransmissions. */
const SAME_ATTEMPT_MS = 120_000;

/**
 * Turns logged packets into counted attempts: one per connection tuple (retransmissions are not
 * new attempts), grouped by lease, source, destination and port, handed over once per window.
 */
export class DropAudit {
  private readonly seen = new Map<string, number>();
  private readonly pending = new Map<string, Map<string, DroppedAttempt>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: { now: () => number; flush: (leaseId: string, attempts: DroppedAttempt[]) => void; windowMs?: number }) {}

  add(leaseId: string, l: DropLine, reason: string): void {
    const now = this.o.now();
    const tuple = `${l.proto} ${l.src}:${l.sport} ${l.dst}:${l.dport}`;
    const before = this.seen.get(tuple);
    this.seen.set(tuple, now);
    if (before !== undefined && now - before < SAME_ATTEMPT_MS) return;
    const rows = this.pending.get(leaseId) ?? this.pending.set(leaseId, new Map()).get(leaseId)!;
    const target = l.dport ? `${l.dst}:${l.dport}` : l.dst;
    const key = `${l.proto} ${l.src} ${target}`;
    const row = rows.get(key) ?? (rows.size < MAX_ROWS ? undefined : rows.get('*'));
    if (row) {
      row.count += 1;
      row.lastAt = now;
    } else if (rows.size < MAX_ROWS) {
      rows.set(key, { proto: l.proto, target, from: l.src, count: 1, firstAt: now, lastAt: now, reason });
    } else {
      rows.set('*', { proto: '*', target: '*', from: '*', count: 1, firstAt: now, lastAt: now, reason: `more than ${MAX_ROWS} destinations in one window` });
    }
    this.timer ??= setTimeout(() => this.flush(), this.o.windowMs ?? 1000).unref();
  }

  /** Hands over everything counted so far (also called when a lease closes, so nothing waits for the timer). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = this.o.now();
    for (const [t, at] of this.seen) if (now - at >= SAME_ATTEMPT_MS) this.seen.delete(t);
    const batches = [...this.pending];
    this.pending.clear();
    for (const [leaseId, rows] of batches) this.o.flush(leaseId, [...rows.values()]);
  }
}
