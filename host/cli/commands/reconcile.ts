/**
 * `berth reconcile RUN`: the operator's answers for a run in `needs_reconciliation` (did the
 * uncertain effects happen, which sandbox state to continue from, or ask the service again). The
 * policy is the API's (host/api/reconcile.ts); this parses, calls and prints.
 */
import { getRunOrThrow } from '../../api/decisions';
import { reconcile } from '../../api/reconcile';
import { stepCount } from '../../api/plans';
import { operator } from '../../api/runtime';
import type { CliContext } from '../context';
import { emit } from '../output';
import { progressPrinter } from './progress';
import { finishDriven } from './run-summary';

/** The operator's answers to `berth reconcile`, as parsed. */
export interface ReconcileChoice {
  accept: boolean;
  'reject-effect'?: boolean;
  restore?: string;
  fail: boolean;
  verify?: boolean;
}

const who = (o: { hostId: string; pid: number | null }) => `host ${o.hostId}${o.pid ? ` (pid ${o.pid})` : ''}`;

export async function reconcileRun(ctx: CliContext, runId: string, choice: ReconcileChoice): Promise<number> {
  const actor = operator();
  const total = await stepCount(ctx, await getRunOrThrow(ctx.store, runId)).catch(() => 0);
  const r = await reconcile(ctx, runId, { accept: choice.accept, rejectEffect: choice['reject-effect'], restore: choice.restore, fail: choice.fail, verify: choice.verify }, actor, { onProgress: progressPrinter(ctx.json, () => total) });
  if (r.kind === 'delivered') {
    emit(ctx.json, { run: r.run, owner: r.owner, reason: r.reason }, () => `reconciling run ${runId}: ${r.reason}; ${who(r.owner)} drives it and carries this out`);
    return 0;
  }
  if (r.kind === 'failed') {
    const left = r.leftUncertain.length ? `; left uncertain (may or may not have happened, never run again): ${r.leftUncertain.join(', ')}` : '';
    emit(ctx.json, { run: r.run, ...(r.owner ? { owner: r.owner } : {}), leftUncertain: r.leftUncertain }, () => (r.owner ? `run ${runId}: failed by ${actor}${left}; ${who(r.owner)} drives it and stops its tasks` : `run ${runId}: failed by ${actor}${left}`));
    return 0;
  }
  if (r.kind === 'settled') {
    emit(ctx.json, { run: r.run, [r.answer]: r.effectIds }, () => `run ${runId}: ${r.to}; ${r.effectIds.length} uncertain effect(s) ${r.answer} by ${actor}`);
    return 0;
  }
  const v = r.verified;
  if (v && !ctx.json) {
    for (const s of v.settled) process.stderr.write(`  ${s.effectId}: ${s.status} (${s.how})\n`);
    for (const o of v.open) process.stderr.write(`  ${o.effectId}: still uncertain: ${o.reason}\n`);
  }
  if (r.kind === 'drive') {
    if (!v && !ctx.json) process.stderr.write(`reconciling run ${runId}: ${r.reason}\n`);
    return finishDriven(ctx, r.rt, runId);
  }
  const after = r.run;
  const done = r.verified;
  emit(ctx.json, { run: after, settled: done.settled, open: done.open }, () => `run ${runId}: ${after.state}${done.open.length ? `; ${done.open.length} effect(s) still uncertain (berth reconcile ${runId} --verify again, or --accept | --fail)` : ''}`);
  return after.state === 'completed' || after.state === 'cancelled' ? 0 : after.state === 'needs_reconciliation' ? 3 : 1;
}
