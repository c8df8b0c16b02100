import type { WorkerHost } from '../store';
import { processAlive } from '../support/process-alive';

/** A worker whose heartbeat (about once a second) is older than this is stale; older than DEAD_MS, dead. */
const STALE_MS = 5_000;
const DEAD_MS = 30_000;

export type WorkerLiveness = 'live' | 'stale' | 'dead' | 'stopped' | 'draining';

/**
 * What a worker is now, from its record: `stopped` (it drained and said so), `dead` (a process of
 * this machine that is gone, or a heartbeat older than 30 s), `stale` (a heartbeat older than 5 s:
 * frozen, partitioned or overloaded), `draining` (an operator asked it to drain and it still
 * beats), else `live`. A SIGKILLed worker never reads as running.
 */
export function livenessOf(h: WorkerHost, now: number, thisHostId: string): WorkerLiveness {
  if (h.stoppedAt !== null) return 'stopped';
  const age = now - h.heartbeatAt;
  if (h.hostId === thisHostId && h.pid !== null && !processAlive(h.pid)) return 'dead';
  if (age > DEAD_MS) return 'dead';
  if (age > STALE_MS) return 'stale';
  return h.drainRequestedAt !== null ? 'draining' : 'live';
}
