import type Database from 'better-sqlite3';
import type { CostRecords } from '../read-ports';
import type { CostMeter, CostSample, CostTotal } from '../../model';
import { deferredSync } from './deferred-sync';
import type { Row } from './rows';


export function sqliteCostRecords(db: Database.Database): CostRecords {
  const insert = db.prepare('INSERT INTO cost_samples (run_id, at, meter, meter_key, amount) VALUES (?, ?, ?, ?, ?)');
  const record = db.transaction((s: CostSample) => {
    for (const [meter, amount] of Object.entries(s.meters)) {
      if (amount === undefined || !Number.isFinite(amount)) continue;
      insert.run(s.runId, s.at, meter, s.key, Math.round(amount as number));
    }
  });
  const later = deferredSync(db);
  const sums = db.prepare('SELECT run_id, meter, meter_key, SUM(amount) AS amount FROM cost_samples GROUP BY run_id, meter, meter_key ORDER BY run_id, meter, meter_key');
  const sumsOf = db.prepare('SELECT run_id, meter, meter_key, SUM(amount) AS amount FROM cost_samples WHERE run_id = ? GROUP BY run_id, meter, meter_key ORDER BY meter, meter_key');
  const rows = db.prepare('SELECT run_id, at, meter, meter_key, amount FROM cost_samples WHERE run_id = ? ORDER BY at, rowid');
  const rowsPage = db.prepare('SELECT run_id, at, meter, meter_key, amount FROM cost_samples WHERE run_id = ? ORDER BY at, rowid LIMIT ? OFFSET ?');
  const toTotal = (r: Row): CostTotal => ({ runId: r.run_id as string, meter: r.meter as CostMeter, key: r.meter_key as string, amount: Number(r.amount) });
  return {
    async recordCost(sample, opts) {
      if (opts?.sync === 'with-next-commit') later(() => record(sample));
      else record(sample);
    },
    async sumCost(filter = {}) {
      if (!filter.runIds) return (sums.all() as Row[]).map(toTotal);
      return filter.runIds.flatMap((id) => (sumsOf.all(id) as Row[]).map(toTotal));
    },
    async listCost(filter) {
      const { runId, page } = filter;
      const found = (page ? rowsPage.all(runId, Math.max(0, Math.floor(page.limit)), Math.max(0, Math.floor(page.offset))) : rows.all(runId)) as Row[];
      return found.map((r) => ({ ...toTotal(r), at: r.at as number }));
    },
  };
}
