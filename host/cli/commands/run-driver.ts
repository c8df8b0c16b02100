import type { Run, RunState } from '../../model';
import type { ExecutionRight, Store } from '../../store';
import { duration } from '../output';

/** A heartbeat older than this (the host beats every 2 s) means nobody is driving the store. */
export const STALE_HEARTBEAT_MS = 10_000;

/** States in which a run moves only while a host drives it (the waits need one to carry out the decision). */
const DRIVEN: readonly RunState[] = ['admitted', 'running', 'retry_wait', 'cancelling', 'compensating', 'reconciling', 'waiting_for_input', 'awaiting_approval'];

/** Who drives the store's runs, as `status --json` and `show --json` report it. */
export interface HostView {
  hostId: string;
  pid: number | null;
  lastHeartbeatAt: number;
  stoppedAt: number | null;
  live: boolean;
}

/**
 * Whether the holder of the execution right is alive: it has not stopped cleanly, its heartbeat is
 * fresh, and, when it is a process of this machine's host id, that process still exists (a SIGKILL
 * shows at once rather than after the heartbeat goes stale).
 */
export function hostView(right: ExecutionRight | undefined, now: number, localHostId: string, pidAlive: (pid: number) => boolean = processAlive): HostView | null {
  if (!right) return null;
  const fresh = now - right.heartbeatAt < STALE_HEARTBEAT_MS;
  const local = right.holder === localHostId && right.pid !== null;
  const live = right.stoppedAt === null && fresh && (!local || pidAlive(right.pid!));
  return { hostId: right.holder, pid: right.pid, lastHeartbeatAt: right.heartbeatAt, stoppedAt: right.stoppedAt, live };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The run's host (null when its state needs none), and one line saying it for people. */
export function driverOf(run: Run, host: HostView | null, now: number): { owner: HostView | null; line: string } {
  if (!DRIVEN.includes(run.state)) return { owner: null, line: run.state };
  if (host?.live) return { owner: host, line: `${run.state} on host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} (heartbeat ${duration(now - host.lastHeartbeatAt)} ago)` };
  const last = host ? (host.stoppedAt ?? host.lastHeartbeatAt) : run.updatedAt;
  return { owner: host, line: `${run.state}, no live host (stopped ${duration(now - last)} ago): berth resume ${run.id}` };
}

/**
 * The host driving a run: its session's owner when a worker (or a take-over) owns it (live while
 * its lease holds on the database clock), else the store-wide holder, read once per call.
 */
export async function readHost(store: Store, now: number, localHostId: string, sessionId?: string): Promise<HostView | null> {
  const owner = sessionId ? await store.getSessionOwner(sessionId) : undefined;
  if (owner && owner.stoppedAt === null) {
    const dbNow = await store.databaseNow();
    return { hostId: owner.holder, pid: owner.pid, lastHeartbeatAt: owner.heartbeatAt, stoppedAt: null, live: owner.leaseUntil >= dbNow };
  }
  return hostView(await store.getExecutionRight('kernel'), now, localHostId);
}
