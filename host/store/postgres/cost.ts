import type pg from 'pg';
import type { CostMeter, CostTotal } from '../../model';
import type { CostRecords } from '../read-ports';
import { query, type Row } from './open';

const toTotal = (r: Row): CostTotal => ({ runId: r.run_id as string, meter: r.meter as CostMeter, key: r.meter_key as string, amount: Number(r.amount) });

/** Cost samples (see the SQLite twin): one row per meter, summed at read time. */
export function postgresCostRecords(pool: pg.Pool): CostRecords {
  return {
    async recordCost(s) {
      const meters = Object.entries(s.meters).filter(([, amount]) => amount !== undefined && Number.isFinite(amount));
      if (meters.length === 0) return;
      // One statement, so a sample's meters land together (SQLite wraps its inserts in a transaction):
      // $1 run, $2 at, $3 key, then each meter's (name, amount) pair.
      const args: unknown[] = [s.runId, s.at, s.key];
      for (const [meter, amount] of meters) args.push(meter, Math.round(amount as number));
      const rows = meters.map((_, i) => `($1, $2, $${4 + 2 * i}, $3, $${5 + 2 * i})`).join(', ');
      await query(pool, `INSERT INTO cost_samples (run_id, at, meter, meter_key, amount) VALUES ${rows}`, args);
    },
    async sumCost(filter = {}) {
      if (!filter.runIds) {
        return (await query(pool, 'SELECT run_id, meter, meter_key, SUM(amount) AS amount FROM cost_samples GROUP BY run_id, meter, meter_key ORDER BY run_id, meter, meter_key')).map(toTotal);
      }
      const out: CostTotal[] = [];
      for (const id of filter.runIds) {
        const rows = await query(pool, 'SELECT run_id, meter, meter_key, SUM(amount) AS amount FROM cost_samples WHERE run_id = $1 GROUP BY run_id, meter, meter_key ORDER BY meter, meter_key', [id]);
        out.push(...rows.map(toTotal));
      }
      return out;
    },
    async listCost(filter) {
      const { runId, page } = filter;
      const rows = page
        ? await query(pool, 'SELECT run_id, at, meter, meter_key, amount FROM cost_samples WHERE run_id = $1 ORDER BY at, ord LIMIT $2 OFFSET $3', [runId, Math.max(0, Math.floor(page.limit)), Math.max(0, Math.floor(page.offset))])
        : await query(pool, 'SELECT run_id, at, meter, meter_key, amount FROM cost_samples WHERE run_id = $1 ORDER BY at, ord', [runId]);
      return rows.map((r) => ({ ...toTotal(r), at: r.at as number }));
    },
  };
}
