import type { Logger } from 'pino';
import type { Lease } from '../sandbox';
import type { Store } from '../store';

/**
 * Counts, on the run's cost, the CPU its sandbox used that no sample counts: commands a killed
 * host started and never measured (its meter died with it), cut off by this owner's kill or
 * ended unobserved. The container's cumulative counter less the `cpu.usec` samples recorded under
 * the lease is that work (plus the hosts' own small scripts in it, recovery work too), so a
 * second adoption counts only what came after the first. Only a plan run's own lease: an agent
 * session's sandbox serves many runs, and its samples are spread over them.
 */
export async function countCutOffCpu(d: { store: Store; logger: Logger }, runId: string, lease: Lease): Promise<number> {
  const record = await d.store.getLease(lease.id);
  if (record?.runId !== runId || !(await d.store.getRun(runId))) return 0;
  const total = await lease.cpuUsecTotal().catch(() => undefined);
  if (total === undefined) return 0;
  const counted = (await d.store.listCost({ runId })).filter((s) => s.key === lease.id && s.meter === 'cpu.usec').reduce((n, s) => n + s.amount, 0);
  const uncounted = total - counted;
  if (uncounted <= 0) return 0;
  await d.store.recordCost({ runId, at: Date.now(), key: lease.id, meters: { 'cpu.usec': uncounted } });
  d.logger.info({ runId, leaseId: lease.id, cpuUsec: uncounted }, 'counted the CPU of commands an earlier host started in the sandbox and never measured');
  return uncounted;
}
