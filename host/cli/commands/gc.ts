import { pruneSnapshots } from '../../snapshot';
import { snapshotEngine } from '../../sandbox';
import { releaseEndedRunLeases } from '../../runtime/run-end-leases';
import type { CliContext } from '../context';
import { emit, table } from '../output';

/**
 * `berth gc [--keep N]`: removes this store's containers whose lease is released, expired or
 * unknown, and at once (no TTL wait) every sandbox of a run that reached a final state (reason
 * `run_ended`; an agent session's own sandbox stays with the session); then prunes snapshots beyond
 * the newest N per session (default 5) of finished runs.
 */
export async function gc(ctx: CliContext, keep = 5): Promise<number> {
  const ended = await releaseEndedRunLeases(ctx);
  const removed = [...ended, ...(await ctx.sandbox.sweep())];
  const engine = snapshotEngine(ctx.docker);
  const pruned = await pruneSnapshots({ store: ctx.store, removeSnapshot: engine.removeSnapshot, clock: ctx.clock, logger: ctx.logger }, { keepLast: keep });
  emit(ctx.json, { hostId: ctx.hostId, removed, pruned: pruned.map((s) => s.id) }, () =>
    [
      removed.length === 0
        ? `no leftover containers in this store (host ${ctx.hostId})`
        : `removed ${removed.length} container(s):\n${table([['CONTAINER', 'LEASE', 'REASON'], ...removed.map((r) => [r.containerId.slice(0, 12), r.leaseId ?? '-', r.reason])])}`,
      pruned.length === 0 ? 'no snapshots to prune' : `pruned ${pruned.length} snapshot(s): ${pruned.map((s) => s.id).join(' ')}`,
    ].join('\n'),
  );
  return 0;
}
