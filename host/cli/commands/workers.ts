import { livenessOf } from '../../fleet';
import type { CliContext } from '../context';
import { EXIT } from '../host-right';
import { duration, emit, table } from '../output';

/** `berth workers`: each worker process, whether it lives (by heartbeat), its slots, the runs it owns and those it leaves, and why. */
export async function workersList(ctx: CliContext): Promise<number> {
  const now = await ctx.store.databaseNow();
  const owners = (await ctx.store.listSessionOwners()).filter((o) => o.stoppedAt === null);
  const runs = await ctx.store.listRuns();
  const hosts = (await ctx.store.listHosts()).map((h) => {
    const owns = owners
      .filter((o) => o.holder === h.hostId && o.pid === h.pid)
      .flatMap((o) => runs.filter((r) => r.sessionId === o.sessionId).map((r) => ({ runId: r.id, sessionId: o.sessionId, state: r.state, epoch: o.epoch, leaseUntil: o.leaseUntil, expired: o.leaseUntil < now })));
    const state = livenessOf(h, now, ctx.hostId);
    const slotsInUse = state === 'stopped' || state === 'dead' ? 0 : (h.report?.slotsInUse ?? owns.filter((o) => !o.expired).length);
    return { ...h, state, lastHeartbeatAgoMs: now - h.heartbeatAt, slotsInUse, owns, leaves: h.report?.left ?? [] };
  });
  emit(ctx.json, { now, hosts }, () =>
    hosts.length === 0
      ? 'no workers have run on this store'
      : [
          table([
            ['WORKER', 'STATE', 'HEARTBEAT', 'SLOTS', 'TAGS', 'OWNS'],
            ...hosts.map((h) => [
              h.id,
              h.state,
              `${duration(h.lastHeartbeatAgoMs)} ago`,
              `${h.slotsInUse}/${h.concurrency}`,
              h.tags.join(',') || '-',
              h.owns.map((o) => `${o.runId} (${o.state}, epoch ${o.epoch}${o.expired ? ', lease expired' : ''})`).join(' ') || '-',
            ]),
          ]),
          ...hosts
            .filter((h) => h.leaves.length > 0 && (h.state === 'live' || h.state === 'draining'))
            .map((h) => `${h.id} leaves: ${h.leaves.map((l) => `${l.runId ?? l.sessionId}: ${l.why}`).join('; ')}`),
        ].join('\n'),
  );
  return EXIT.ok;
}
