import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import type { Clock } from '../support/clock';
import { engineError, isNotFound } from './engine-errors';
import { LABEL } from './labels';
import type { LeaseRecord, LeaseRecords, SweepRecord } from './lease-records';

/** What releasing leases by record needs from the host. */
export interface ReleaseContext {
  docker: Dockerode;
  records: LeaseRecords;
  clock: Clock;
  logger: Logger;
  hostId: string;
  storeId: string;
  /** Drops the engine-event counters of a removed container. */
  forget(containerId: string): void;
  /** Stops the proxy and removes the network and INPUT rules of a lease. */
  closeEgress(leaseId: string): Promise<void>;
}

/**
 * Releases the unreleased leases of this store that `select` picks: the record first, as
 * `Lease.release` does (a crash after it leaves a container the sweeper removes as `released`),
 * then the container (by id, and by its `berth.lease` label, which finds the container of a lease
 * still recorded as an intent), then its network and rules. Each removed container is recorded as
 * a sweep with `reason`. Works without a `Lease` object: the holder may be a dead process.
 */
export async function releaseLeases(ctx: ReleaseContext, select: (record: LeaseRecord) => boolean | Promise<boolean>, reason: SweepRecord['reason']): Promise<SweepRecord[]> {
  const out: SweepRecord[] = [];
  for (const record of await ctx.records.listLeases({ unreleased: true })) {
    if (!(await select(record))) continue;
    const at = ctx.clock.now();
    await ctx.records.releaseLease(record.id, at);
    let labelled: Dockerode.ContainerInfo[];
    try {
      labelled = await ctx.docker.listContainers({ all: true, filters: { label: [`${LABEL.lease}=${record.id}`, `${LABEL.store}=${ctx.storeId}`] } });
    } catch (err) {
      throw engineError('list containers of a lease', err, { leaseId: record.id });
    }
    const ids = new Set([...(record.containerId ? [record.containerId] : []), ...labelled.map((c) => c.Id)]);
    for (const id of ids) {
      try {
        await ctx.docker.getContainer(id).remove({ force: true, v: true });
      } catch (err) {
        // The record is released: a later sweep removes what this could not.
        if (!isNotFound(err)) ctx.logger.warn({ err, containerId: id, leaseId: record.id }, 'could not remove the container of a released lease');
        continue;
      }
      ctx.forget(id);
      const entry: SweepRecord = { containerId: id, leaseId: record.id, hostId: ctx.hostId, reason, at };
      await ctx.records.recordSweep(entry);
      out.push(entry);
    }
    // Only networked leases have a network (and rules) to tear down.
    const nets = await ctx.docker.listNetworks({ filters: { label: [`${LABEL.lease}=${record.id}`] } }).catch(() => []);
    if (nets.length) await ctx.closeEgress(record.id);
  }
  return out;
}
