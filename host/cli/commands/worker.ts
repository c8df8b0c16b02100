import { startWorker } from '../../api/worker';
import { leaseTtlMs } from '../../api/runtime';
import { BerthError } from '../../errors';
import type { CliContext } from '../context';
import { EXIT } from '../host-right';
import { stopSignals } from '../stop-signals';

export { DEFAULT_LEASE_TTL_MS, leaseTtlMs, heartbeatEvery } from '../../api/runtime';

/** `berth worker [--concurrency N] [--tags a,b] [--lease-ttl S]`: drives claimed runs (through the API's worker) until SIGTERM drains it. */
export async function workerCommand(ctx: CliContext, flags: { concurrency?: string; tags?: string; 'lease-ttl'?: string; grace?: string }): Promise<number> {
  const concurrency = flags.concurrency === undefined ? 2 : Number(flags.concurrency);
  if (!Number.isInteger(concurrency) || concurrency <= 0) throw new BerthError('usage', `--concurrency expects a positive whole number of runs, found "${flags.concurrency}"`);
  const graceMs = flags.grace === undefined ? 30_000 : Number(flags.grace) * 1000;
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new BerthError('usage', `--grace expects seconds, found "${flags.grace}"`);
  const tags = (flags.tags ?? '').split(',').map((t) => t.trim()).filter(Boolean);
  const ttl = leaseTtlMs(flags['lease-ttl']);
  let drainAsked = () => {};
  const left = `The runs this worker owns stay claimed until their lease ends (${ttl / 1000} s), then another worker (or berth resume) takes them over and stops what this one left running.`;
  const stop = new Promise<void>((resolve) => {
    // A drain waits for the running steps (up to --grace): a second signal quits at once, saying what that leaves.
    stopSignals(left, () => resolve());
    drainAsked = resolve;
  });
  const worker = await startWorker(ctx, {
    concurrency,
    tags,
    leaseTtlMs: ttl,
    onClaim: (sessionId, epoch, from) => process.stderr.write(`claimed session ${sessionId} (epoch ${epoch}${from ? `, taken from ${from.holder} whose ${from.why}` : ''})\n`),
    onLost: (l) => process.stderr.write(`lost session ${l.sessionId} (epoch ${l.epoch}) to host ${l.holder ?? '?'}${l.pid ? ` pid ${l.pid}` : ''}; stopped all work on it\n`),
    onDrainRequested: () => drainAsked(),
    // An operator following a worker's log sees each run's end, not only its claim.
    onRunEnded: (run, reason) => process.stderr.write(`run ${run.id} (${run.kind}) ${run.state}${run.state === 'completed' || !reason ? '' : `: ${reason}`}; released session ${run.sessionId}\n`),
  });
  process.stderr.write(`worker ${worker.id} on ${ctx.store.location}: up to ${concurrency} run(s), lease ${ttl / 1000}s${tags.length ? `, tags ${tags.join(',')}` : ''}\n`);
  await stop;
  process.stderr.write('draining: no new claims; running steps finish or stay durably in flight\n');
  await worker.drain(graceMs);
  process.stderr.write('drained; leases released\n');
  return EXIT.ok;
}
