import { acceptanceOf } from '../acceptance';
import type { Store } from '../store';
import { priceOf, type PriceTable } from './price-table';
import { addCost, costOfRun, divideCost, emptyCost, type RunCost } from './run-cost';

/** `berth cost`: every run's cost summed, and divided by the runs that were accepted. */
export interface CostReport {
  /** Runs created at or after this time (ms), or null for all. */
  since: number | null;
  runs: number;
  acceptedRuns: number;
  total: RunCost;
  /** The total over every run (rejected and pending ones included) per accepted run; null with none accepted. */
  perAccepted: RunCost | null;
  prices?: { currency: string; total: number; perAccepted: number | null; parts: ReturnType<typeof priceOf> };
  byRun: Array<{ runId: string; kind: string; state: string; acceptance: string; cost: RunCost }>;
}

export async function costReport(store: Store, o: { since: number | null; now: number; prices?: PriceTable }): Promise<CostReport> {
  const runs = (await store.listRuns()).filter((r) => o.since === null || r.createdAt >= o.since);
  const samples = await store.sumCost({ runIds: runs.map((r) => r.id) });
  let total = emptyCost();
  let accepted = 0;
  const byRun: CostReport['byRun'] = [];
  for (const run of runs) {
    const cost = await costOfRun(store, run, samples, o.now);
    const acceptance = (await acceptanceOf(store, run)).state;
    if (acceptance === 'accepted') accepted += 1;
    total = addCost(total, cost);
    byRun.push({ runId: run.id, kind: run.kind, state: run.state, acceptance, cost });
  }
  const perAccepted = accepted > 0 ? divideCost(total, accepted) : null;
  const report: CostReport = { since: o.since, runs: runs.length, acceptedRuns: accepted, total, perAccepted, byRun };
  if (o.prices) {
    const parts = priceOf(total, o.prices);
    report.prices = { currency: o.prices.currency, total: parts.total, perAccepted: accepted > 0 ? parts.total / accepted : null, parts };
  }
  return report;
}
