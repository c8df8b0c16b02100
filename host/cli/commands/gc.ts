import type { CliContext } from '../context';
import { emit, table } from '../output';

/** `berth gc`: removes this host's containers whose lease is released, expired or unknown, and says which. */
export async function gc(ctx: CliContext): Promise<number> {
  const removed = await ctx.sandbox.sweep();
  emit(ctx.json, { hostId: ctx.hostId, removed }, () =>
    removed.length === 0
      ? `nothing to remove for host ${ctx.hostId}`
      : `removed ${removed.length} container(s):\n${table([['CONTAINER', 'LEASE', 'REASON'], ...removed.map((r) => [r.containerId.slice(0, 12), r.leaseId ?? '-', r.reason])])}`,
  );
  return 0;
}
