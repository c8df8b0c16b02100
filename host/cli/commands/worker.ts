import { BerthError } from '../../errors';
import { PlacementCheck, Worker } from '../../fleet';
import { releaseEndedRunLeases } from '../../runtime/run-end-leases';
import type { CliContext } from '../context';
import { duration, emit, table } from '../output';
import { EXIT } from '../host-right';
import { cliRuntime } from '../cli-runtime';

/** Default claim lifetime without a renewal; `--lease-ttl S` or `BERTH_LEASE_TTL_MS` change it (tests use short ones). */
export const DEFAULT_LEASE_TTL_MS = 30_000;

/** The run-ownership lease TTL in ms: `--lease-ttl` seconds, else `BERTH_LEASE_TTL_MS`, else 30 s. */
export function leaseTtlMs(flag: string | undefined): number {
  if (flag !== undefined) {
    const s = Number(flag);
    if (!Number.isFinite(s) || s <= 0) throw new BerthError('usage', `--lease-ttl expects seconds (> 0), found "${flag}"`);
    return Math.round(s * 1000);
  }
  const env = process.env.BERTH_LEASE_TTL_MS;
  if (env !== undefined) {
    const ms = Number(env);
    if (!Number.isInteger(ms) || ms <= 0) throw new BerthError('usage', `BERTH_LEASE_TTL_MS expects whole milliseconds (> 0), found "${env}"`);
    return ms;
  }
  return DEFAULT_LEASE_TTL_MS;
}

/** A runtime whose kernel claims nothing by itself (a worker, a detached submit): sessions are claimed one by one. */
export function fleetRuntime(ctx: CliContext, ttlMs: number, concurrency = 4) {
  return cliRuntime(ctx, { claim: 'none', ttlMs, concurrency });
}

export const heartbeatEvery = (ttlMs: number) => Math.max(50, Math.floor(ttlMs / 3));

/** `berth worker [--concurrency N] [--tags a,b] [--lease-ttl S]`: drives claimed runs until SIGTERM drains it. */
export async function workerCommand(ctx: CliContext, flags: { concurrency?: string; tags?: string; 'lease-ttl'?: string; grace?: string }): Promise<number> {
  const concurrency = flags.concurrency === undefined ? 2 : Number(flags.concurrency);
  if (!Number.isInteger(concurrency) || concurrency <= 0) throw new BerthError('usage', `--concurrency expects a positive whole number of runs, found "${flags.concurrency}"`);
  const graceMs = flags.grace === undefined ? 30_000 : Number(flags.grace) * 1000;
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new BerthError('usage', `--grace expects seconds, found "${flags.grace}"`);
  const tags = (flags.tags ?? '').split(',').map((t) => t.trim()).filter(Boolean);
  const ttl = leaseTtlMs(flags['lease-ttl']);
  // Phases at once: a plan run holds its waiting root task and one step.
  const rt = fleetRuntime(ctx, ttl, Math.max(4, concurrency * 2));
  let rounds = 0;
  let drainAsked = () => {};
  const worker = new Worker({
    store: ctx.store,
    kernel: rt.kernel,
    sandbox: ctx.sandbox,
    placement: new PlacementCheck({ store: ctx.store, sandbox: ctx.sandbox, hostRegistry: process.env.BERTH_REGISTRY }),
    onDrainRequested: () => drainAsked(),
    logger: ctx.logger,
    hostId: ctx.hostId,
    pid: process.pid,
    concurrency,
    tags,
    leaseTtlMs: ttl,
    claimEveryMs: Math.min(1000, heartbeatEvery(ttl)),
    onClaim: (sessionId, epoch, from) => process.stderr.write(`claimed session ${sessionId} (epoch ${epoch}${from ? `, taken from ${from.holder} whose ${from.why}` : ''})\n`),
    // As `berth run` does at a run's end: every sandbox of its ended runs goes, and what a stale
    // owner's release left (a container, a network) is swept at once rather than at the next start.
    onReleased: async (sessionId) => {
      const runIds = (await ctx.store.listRuns({ sessionId })).map((r) => r.id);
      await releaseEndedRunLeases(ctx, runIds);
      await ctx.sandbox.sweep();
    },
    onTick: async () => {
      // Ended runs' sandboxes go (the runtime releases them at run end; this catches what a dead owner left).
      if (rounds++ % 10 !== 0) return;
      await releaseEndedRunLeases(ctx).catch((err: unknown) => ctx.logger.warn({ err }, 'could not release ended runs\' leases'));
      await ctx.sandbox.sweep().catch((err: unknown) => ctx.logger.warn({ err }, 'sweep failed; the next round tries again'));
    },
  });
  rt.kernel.onSessionLost((l) => process.stderr.write(`lost session ${l.sessionId} (epoch ${l.epoch}) to host ${l.holder ?? '?'}${l.pid ? ` pid ${l.pid}` : ''}; stopped all work on it\n`));
  const stop = new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
    drainAsked = resolve;
  });
  await ctx.sandbox.sweep().catch((err: unknown) => ctx.logger.warn({ err }, 'start-up sweep failed'));
  await worker.start();
  process.stderr.write(`worker ${worker.id} on ${ctx.store.location}: up to ${concurrency} run(s), lease ${ttl / 1000}s${tags.length ? `, tags ${tags.join(',')}` : ''}\n`);
  await stop;
  process.stderr.write('draining: no new claims; running steps finish or stay durably in flight\n');
  await worker.drain(graceMs);
  await rt.leasesReleased();
  await ctx.sandbox.sweep().catch((err: unknown) => ctx.logger.warn({ err }, 'drain sweep failed; berth gc removes what is left'));
  process.stderr.write('drained; leases released\n');
  return EXIT.ok;
}

/** `berth workers`: worker processes, their last heartbeat and the runs they own. */
export async function workersList(ctx: CliContext): Promise<number> {
  const now = await ctx.store.databaseNow();
  const owners = (await ctx.store.listSessionOwners()).filter((o) => o.stoppedAt === null);
  const runs = await ctx.store.listRuns();
  const hosts = (await ctx.store.listHosts()).map((h) => {
    const owns = owners
      .filter((o) => o.holder === h.hostId && o.pid === h.pid)
      .flatMap((o) => runs.filter((r) => r.sessionId === o.sessionId).map((r) => ({ runId: r.id, sessionId: o.sessionId, state: r.state, epoch: o.epoch, leaseUntil: o.leaseUntil, expired: o.leaseUntil < now })));
    return { ...h, lastHeartbeatAgoMs: now - h.heartbeatAt, owns };
  });
  emit(ctx.json, { now, hosts }, () =>
    hosts.length === 0
      ? 'no workers have run on this store'
      : table([
          ['WORKER', 'STATE', 'HEARTBEAT', 'TAGS', 'OWNS'],
          ...hosts.map((h) => [
            h.id,
            h.stoppedAt !== null ? 'stopped' : 'running',
            `${duration(h.lastHeartbeatAgoMs)} ago`,
            h.tags.join(',') || '-',
            h.owns.map((o) => `${o.runId} (${o.state}, epoch ${o.epoch}${o.expired ? ', lease expired' : ''})`).join(' ') || '-',
          ]),
        ]),
  );
  return EXIT.ok;
}
