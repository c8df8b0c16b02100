import { BerthError } from '../../errors';
import type { CliContext } from '../context';
import { EXIT } from '../host-right';
import { emit } from '../output';
import { operator } from './plan-run';

/**
 * `berth drain WORKER|HOST`: asks a worker (`host:pid`, as `berth workers` lists it) or every live
 * worker of a host id to drain, from any machine that reaches the store. Recorded on the worker's
 * row; the worker reads it at its next round (about a second) and drains as on SIGTERM: no new
 * claims, running steps get its grace, its runs are released and its sandboxes removed.
 */
export async function drainCommand(ctx: CliContext, id: string): Promise<number> {
  const asked = await ctx.store.requestDrain(id);
  if (asked.length === 0) {
    const known = (await ctx.store.listHosts()).filter((h) => h.id === id || h.hostId === id);
    const why = known.length === 0 ? 'no worker of that id or host has run on this store' : 'its workers are stopped or were asked to drain already';
    throw new BerthError('worker_not_found', `nothing to drain for ${id}: ${why} (see berth workers)`, { details: { id } });
  }
  ctx.logger.info({ workers: asked, actor: operator() }, 'drain requested');
  emit(ctx.json, { asked, by: operator() }, () => `asked ${asked.join(', ')} to drain (berth workers shows it draining, then stopped)`);
  return EXIT.ok;
}
