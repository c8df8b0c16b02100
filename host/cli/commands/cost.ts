import { dirname, join } from 'node:path';
import { costReport, loadHostConfig, type RunCost } from '../../cost';
import { BerthError } from '../../errors';
import type { CliContext } from '../context';
import { emit, table } from '../output';

/** The host config beside the store (`berth.config.yaml`), or `--config` / `$BERTH_CONFIG`. */
export function hostConfigPath(ctx: CliContext, flag: string | undefined): { path: string; required: boolean } {
  const given = flag ?? process.env.BERTH_CONFIG;
  return given ? { path: given, required: true } : { path: join(dirname(ctx.store.location), 'berth.config.yaml'), required: false };
}

function sinceOf(text: string | undefined, now: number): number | null {
  if (text === undefined) return null;
  const rel = /^(\d+)([smhd])$/.exec(text);
  if (rel) return now - Number(rel[1]) * { s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7 }[rel[2] as 's' | 'm' | 'h' | 'd'];
  const t = Date.parse(text);
  if (Number.isNaN(t)) throw new BerthError('usage', `--since expects a time (2026-11-30, 2026-11-30T12:00:00Z) or an age (90m, 24h, 7d), found "${text}"`);
  return t;
}

/** `berth cost [--since T] [--config FILE] [--json]`. */
export async function cost(ctx: CliContext, o: { since?: string; config?: string }): Promise<number> {
  const now = ctx.clock.now();
  const since = sinceOf(o.since, now);
  const { path, required } = hostConfigPath(ctx, o.config);
  const prices = loadHostConfig(path, required).prices;
  const r = await costReport(ctx.store, { since, now, prices });
  emit(ctx.json, r, () => {
    const head = `${r.runs} run${r.runs === 1 ? '' : 's'}${since === null ? '' : ` since ${new Date(since).toISOString()}`}, ${r.acceptedRuns} accepted`;
    const rows = [['', 'TOTAL', 'PER ACCEPTED RUN'], ...costRows(r.total, r.perAccepted)];
    if (r.prices) rows.push([`price (${r.prices.currency})`, r.prices.total.toFixed(4), r.prices.perAccepted === null ? '-' : r.prices.perAccepted.toFixed(4)]);
    return `${head}\n${table(rows)}`;
  });
  return 0;
}

const n = (v: number, digits = 2) => (Number.isInteger(v) ? String(v) : v.toFixed(digits));

/** Rows `what | figure` for one run, or `what | total | per accepted` when `per` is given (null: none accepted). */
export function costRows(c: RunCost, per?: RunCost | null): string[][] {
  const rows: Array<[string, (x: RunCost) => string]> = [];
  const models = [...new Set([...Object.keys(c.tokens), ...Object.keys(per?.tokens ?? {})])];
  for (const m of models) {
    const t = (x: RunCost) => x.tokens[m] ?? { requests: 0, prompt: 0, completion: 0, cached: 0 };
    rows.push([`tokens ${m}`, (x) => `${n(t(x).prompt)} prompt (${n(t(x).cached)} cached), ${n(t(x).completion)} completion, ${n(t(x).requests)} requests`]);
  }
  rows.push(['sandbox CPU', (x) => `${n(x.cpuSeconds, 3)} s`]);
  rows.push(['sandbox memory', (x) => `${n(x.memoryGbSeconds, 3)} GB-s`]);
  rows.push(['lease time', (x) => `${n(x.leaseSeconds, 1)} s`]);
  rows.push(['snapshots stored', (x) => `${(x.snapshotBytes / 1e6).toFixed(1)} MB (${x.snapshotGbMonths.toExponential(2)} GB-months)`]);
  rows.push(['approval wait', (x) => `${n(x.approvalWaitSeconds, 1)} s`]);
  rows.push(['recovery', (x) => `${n(x.recovery.stepsRerun)} steps re-run, ${n(x.recovery.restores)} restores`]);
  return rows.map(([what, f]) => (per === undefined ? [what, f(c)] : [what, f(c), per ? f(per) : '-']));
}
