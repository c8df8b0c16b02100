import { pruneSnapshots } from '../../snapshot';
import { snapshotEngine } from '../../sandbox';
import type { CliContext } from '../context';
import { emit, table } from '../output';

/**
 * `berth gc [--keep N]`: removes this host's containers whose lease is released, expired or
 * unknown, and prunes snapshots beyond the newest N per session (default 5) of finished runs.
 */
export async function gc(ctx: CliContext, keep = 5): Promise<number> {
  const removed = await ctx.sandbox.sweep();
  const engine = snapshotEngine(ctx.docker);
  const pruned = await pruneSnapshots({ store: ctx.store, removeSnapshot: engine.removeSnapshot, clock: ctx.clock, logger: ctx.logger }, { keepLast: keep });
  emit(ctx.json, { hostId: ctx.hostId, removed, pruned: pruned.map((s) => s.id) }, () =>
    [
      removed.length === 0
        ? `no leftover containers for host ${ctx.hostId}`
        : `removed ${removed.length} container(s):\n${table([['CONTAINER', 'LEASE', 'REASON'], ...removed.map((r) => [r.containerId.slice(0, 12), r.leaseId ?? '-', r.reason])])}`,
      pruned.length === 0 ? 'no snapshots to prune' : `pruned ${pruned.length} snapshot(s): ${pruned.map((s) => s.id).join(' ')}`,
    ].join('\n'),
  );
  return 0;
}
