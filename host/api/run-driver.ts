import type { Run, RunState } from '../model';
import { ownerGone } from '../kernel';
import { processAlive } from '../support/process-alive';
import type { SessionOwner, Store } from '../store';
import { duration } from './duration';

/** States in which a run moves only while a host drives it (the waits need one to carry out the decision). */
const DRIVEN: readonly RunState[] = ['admitted', 'running', 'retry_wait', 'cancelling', 'compensating', 'reconciling', 'waiting_for_input', 'awaiting_approval'];

/** Who drives the store's runs, as `status --json` and `show --json` report it. */
export interface HostView {
  hostId: string;
  pid: number | null;
  lastHeartbeatAt: number;
  /** Database-clock time until which its claim holds without a renewal. */
  leaseUntil: number;
  stoppedAt: number | null;
  live: boolean;
}

/**
 * Whether the owner of a run's session is alive (DESIGN.md "More than one host"): it has not
 * released the session, its lease holds on the database clock, and, when it is a process of this
 * machine's host id, that process still exists (a SIGKILL shows at once rather than after the TTL).
 */
export function hostView(owner: SessionOwner | undefined, dbNow: number, localHostId: string, pidAlive: (pid: number) => boolean = processAlive): HostView | null {
  if (!owner) return null;
  return { hostId: owner.holder, pid: owner.pid, lastHeartbeatAt: owner.heartbeatAt, leaseUntil: owner.leaseUntil, stoppedAt: owner.stoppedAt, live: !ownerGone(owner, dbNow, localHostId, pidAlive) };
}

/** The run's host (null when its state needs none), and one line saying it for people. */
export function driverOf(run: Run, host: HostView | null, now: number): { owner: HostView | null; line: string } {
  if (!DRIVEN.includes(run.state)) return { owner: null, line: run.state };
  if (host?.live) return { owner: host, line: `${run.state} on host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} (heartbeat ${duration(now - host.lastHeartbeatAt)} ago${overdueNote(host, now)})` };
  // No owner row at all: submitted (--detach, a fork) and never claimed; nothing stopped.
  if (!host) return { owner: null, line: `${run.state}, not claimed by any host yet (submitted ${duration(now - run.createdAt)} ago): a berth worker claims it, or berth resume ${run.id}` };
  return { owner: host, line: `${run.state}, no live host (stopped ${duration(now - (host.stoppedAt ?? host.lastHeartbeatAt))} ago): berth resume ${run.id}` };
}

/**
 * `: not renewing, claim expires in 4.1s` for a live owner past half its claim's TTL without a
 * renewal (it renews every third: frozen, paused or overloaded; see owner-claim.ts), else nothing.
 */
function overdueNote(host: HostView, now: number): string {
  const ttl = host.leaseUntil - host.lastHeartbeatAt;
  if (!(ttl > 0) || now - host.lastHeartbeatAt <= ttl / 2) return '';
  return `: not renewing, claim expires in ${duration(Math.max(0, host.leaseUntil - now))}`;
}

/** The host driving a run: the owner of its session, read once per call. */
export async function readHost(store: Store, _now: number, localHostId: string, sessionId: string): Promise<HostView | null> {
  const owner = await store.getSessionOwner(sessionId);
  return hostView(owner, await store.databaseNow(), localHostId);
}
