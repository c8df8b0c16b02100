import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import type { Clock } from '../support/clock';
import { engineError, isNotFound, isRemovalInProgress } from './engine-errors';
import { LABEL } from './labels';
import type { LeaseRecord, LeaseRecords, SweepRecord } from './lease-records';
import { sweepEgress, type EgressSweep, type LeaseView } from './sandbox-network';

export interface SweepContext {
  docker: Dockerode;
  records: LeaseRecords;
  clock: Clock;
  logger: Logger;
  hostId: string;
  /** Only containers of this store are considered (see LeaseRecords.storeId). */
  storeId: string;
  instanceId: string;
  /** Containers of this instance that it gave up on (their removal failed). */
  isAbandoned(containerId: string): boolean;
}

/**
 * Removes this store's containers (label `berth.store`; another store under the same host id is
 * left alone) that nobody may use any more, and records each removal:
 *
 * - `released`: the lease record is released (the holder died between the two steps of release);
 * - `expired`: the lease was not heartbeated within its TTL;
 * - `unknown`: no lease record names the container and another instance created it (a lease whose
 *   record was never written, an idle pool container of a dead instance). This instance's own
 *   unrecorded containers are a lease in flight or an idle pool member, and are kept, so a sweep
 *   can never race a lease being created; only those it abandoned are removed.
 *
 * A container with an active lease is left alone even when stopped; `verify` reports that.
 */
export async function sweep(ctx: SweepContext, signal?: AbortSignal): Promise<SweepRecord[]> {
  let containers: Dockerode.ContainerInfo[];
  try {
    containers = await ctx.docker.listContainers({ all: true, filters: { label: [`${LABEL.managed}=1`, `${LABEL.host}=${ctx.hostId}`] } });
  } catch (err) {
    throw engineError('list containers for sweep', err);
  }
  const records = await leaseRecordsOf(ctx, containers);
  const byContainer = new Map(records.filter((r) => r.containerId !== '').map((r) => [r.containerId, r]));
  // An intent names no container yet; its container is found by the lease label.
  const intents = new Map(records.filter((r) => r.containerId === '').map((r) => [r.id, r]));
  const removed: SweepRecord[] = [];
  for (const c of containers) {
    signal?.throwIfAborted();
    const record = byContainer.get(c.Id) ?? intents.get(c.Labels[LABEL.lease] ?? '');
    // Another store on this machine (same host id) owns it; one made before stores had ids is ours
    // only when our records name it.
    const store = c.Labels[LABEL.store];
    if (store ? store !== ctx.storeId : !record) continue;
    const now = ctx.clock.now();
    let reason: SweepRecord['reason'] | undefined;
    if (record) {
      if (record.releasedAt !== null) reason = 'released';
      else if (record.expiresAt < now) reason = 'expired';
    } else {
      const own = c.Labels[LABEL.instance] === ctx.instanceId;
      if (!own || ctx.isAbandoned(c.Id)) reason = 'unknown';
    }
    if (reason === undefined) continue;
    try {
      await ctx.docker.getContainer(c.Id).remove({ force: true, v: true });
    } catch (err) {
      // Gone, or going under another sweeper (a parallel berth of this store, which records it).
      if (isNotFound(err) || isRemovalInProgress(err)) continue;
      ctx.logger.warn({ err, containerId: c.Id }, 'sweeper could not remove container');
      continue;
    }
    const entry: SweepRecord = { containerId: c.Id, leaseId: record?.id ?? (c.Labels[LABEL.lease] || null), hostId: ctx.hostId, reason, at: now };
    await ctx.records.recordSweep(entry);
    ctx.logger.info({ containerId: c.Id, leaseId: entry.leaseId, reason }, 'swept container');
    removed.push(entry);
  }
  return [...removed, ...(await sweepOthers(ctx, signal))];
}

/**
 * The lease records of this host that name the containers found: by each one's lease label. Every
 * lease the host id ever recorded (which only grow, one or more a run, across restarts) is read
 * only when a container has no lease label: a pool container, whose record names it by id.
 */
async function leaseRecordsOf(ctx: SweepContext, containers: Dockerode.ContainerInfo[]): Promise<LeaseRecord[]> {
  if (containers.some((c) => !c.Labels[LABEL.lease])) return ctx.records.listLeases({ hostId: ctx.hostId });
  return leasesOfHost(ctx, ctx.hostId, containers.map((c) => c.Labels[LABEL.lease]!));
}

async function leasesOfHost(ctx: SweepContext, hostId: string, ids: string[]): Promise<LeaseRecord[]> {
  const found = await Promise.all([...new Set(ids)].map((id) => ctx.records.getLease(id)));
  return found.filter((r): r is LeaseRecord => r !== undefined && r.hostId === hostId);
}

/** Whether each of `ids` is an active lease of `hostId`, and whether the store records it as that host's. */
async function leaseView(ctx: SweepContext, hostId: string, ids: string[]): Promise<LeaseView> {
  const leases = await leasesOfHost(ctx, hostId, ids);
  const now = ctx.clock.now();
  const active = new Set(leases.filter((l) => l.releasedAt === null && l.expiresAt > now).map((l) => l.id));
  const known = new Set(leases.map((l) => l.id));
  return { isActive: (id) => active.has(id), isKnown: (id) => known.has(id) };
}

/**
 * Containers of this store that another host id leased on this engine (another worker beside this
 * one, a host that died, a host on another machine that drove this engine): removed when their
 * lease is released (a new owner took the run over, or a drain gave it up, from an engine that
 * could not reach this one) or expired (its holder stopped renewing it; its watchdog has stopped
 * it already). Only their record decides: a container whose record is live, or that this store
 * does not record, is that host's to keep.
 */
async function sweepOthers(ctx: SweepContext, signal?: AbortSignal): Promise<SweepRecord[]> {
  let containers: Dockerode.ContainerInfo[];
  try {
    containers = await ctx.docker.listContainers({ all: true, filters: { label: [`${LABEL.managed}=1`, `${LABEL.store}=${ctx.storeId}`] } });
  } catch (err) {
    throw engineError('list containers for sweep', err);
  }
  const removed: SweepRecord[] = [];
  for (const c of containers) {
    signal?.throwIfAborted();
    if (c.Labels[LABEL.host] === ctx.hostId) continue;
    const leaseId = c.Labels[LABEL.lease];
    const record = leaseId ? await ctx.records.getLease(leaseId) : undefined;
    if (!record) continue;
    const now = ctx.clock.now();
    const reason: SweepRecord['reason'] | undefined = record.releasedAt !== null ? 'released' : record.expiresAt < now ? 'expired' : undefined;
    if (reason === undefined) continue;
    try {
      await ctx.docker.getContainer(c.Id).remove({ force: true, v: true });
    } catch (err) {
      if (!isNotFound(err) && !isRemovalInProgress(err)) ctx.logger.warn({ err, containerId: c.Id }, 'sweeper could not remove container');
      continue;
    }
    const entry: SweepRecord = { containerId: c.Id, leaseId: record.id, hostId: record.hostId, reason, at: now };
    await ctx.records.recordSweep(entry);
    ctx.logger.info({ containerId: c.Id, leaseId: record.id, owner: record.hostId, reason }, 'swept another host\'s container');
    removed.push(entry);
  }
  return removed;
}

/**
 * The whole sweep of one store: containers first, then egress leftovers (a network is removable
 * only once its container is gone): networks and rules of this store's leases that are no longer
 * active, none of another store's. `egressMinAgeMs` (default two minutes) keeps younger networks,
 * whose lease may be being written.
 */
export async function sweepStore(ctx: SweepContext, options: { signal?: AbortSignal; egressMinAgeMs?: number; egress?: EgressSweep[] } = {}): Promise<SweepRecord[]> {
  const removed = await sweep(ctx, options.signal);
  // This host's egress leftovers, and those of every other host whose container went just now.
  const hosts = new Set([ctx.hostId, ...removed.map((r) => r.hostId)]);
  for (const hostId of hosts) {
    await sweepEgress(ctx.docker, hostId, (ids) => leaseView(ctx, hostId, ids), options.egressMinAgeMs, { storeId: ctx.storeId }).then(
      (r) => options.egress?.push(r),
      (err: unknown) => ctx.logger.warn({ err, hostId }, 'egress sweep failed'),
    );
  }
  return removed;
}
