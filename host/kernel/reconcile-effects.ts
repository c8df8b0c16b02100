import { BerthError } from '../errors';
import { isFinalRunState, type Effect, type Json, type Run } from '../model';
import type { EffectWrite, RunTransitionInput, Store } from '../store';
import type { Clock } from '../support/clock';
import type { Kernel } from './kernel';
import { operatorReceipt } from './operator-receipt';
import type { HandlerRegistry } from './registry';

export interface ReconcileDeps {
  store: Store;
  kernel: Kernel;
  registry: HandlerRegistry;
  clock: Clock;
}

/** What `reconcileEffects` did to each uncertain effect of the run. */
export interface EffectsReconciled {
  run: Run;
  settled: Array<{ effectId: string; status: 'confirmed' | 'failed'; how: 'verified' | 'not-found' | 'operator' }>;
  /** Still uncertain, with why (no verifier for its kind, the lookup failed). */
  open: Array<{ effectId: string; reason: string }>;
  /** The run moved on (a task waiting for the reconciliation was resumed, or the run ended). */
  resumed: boolean;
}

/**
 * Settles the uncertain effects (`executing`, `unknown`) of a run in `needs_reconciliation`:
 * `verify` asks the service through the verifier registered for each effect's kind (found:
 * `confirmed` with the service's receipt; not found: `failed`, it did not happen; no answer: left
 * `unknown`); `accept` confirms each with a receipt typed as the operator's decision. When none is
 * left uncertain, the run continues: a task awaiting `reconcile` gets the decision (the run goes to
 * `reconciling`), or, when the root task has already ended, the run ends as the root did
 * (`completed`, `cancelled` or `failed`). Nothing is sent again from here.
 */
export async function reconcileEffects(d: ReconcileDeps, runId: string, o: { action: 'verify' | 'accept'; actor: string; signal?: AbortSignal }): Promise<EffectsReconciled> {
  const run = await d.store.getRun(runId);
  if (!run) throw new BerthError('run_not_found', `no run ${runId}`, { ids: { runId } });
  if (run.state !== 'needs_reconciliation') throw new BerthError('run_not_reconcilable', `run ${runId} is ${run.state}, not needs_reconciliation`, { ids: { runId } });
  const uncertain = (await d.store.listEffects({ runId })).filter((e) => e.status === 'unknown' || e.status === 'executing');
  const writes: EffectWrite[] = [];
  const out: EffectsReconciled = { run, settled: [], open: [], resumed: false };
  for (const e of uncertain) {
    if (o.action === 'accept') {
      writes.push({ id: e.id, expectStatus: e.status, set: { status: 'confirmed', receipt: operatorReceipt(o.actor, 'accept', d.clock.now(), 'outcome unknown; accepted as happened by the operator') } });
      out.settled.push({ effectId: e.id, status: 'confirmed', how: 'operator' });
      continue;
    }
    const r = await verifyOne(d, e, o.signal ?? new AbortController().signal);
    if (r.kind === 'open') out.open.push({ effectId: e.id, reason: r.reason });
    else {
      writes.push({
        id: e.id,
        expectStatus: e.status,
        set: r.kind === 'found' ? { status: 'confirmed', receipt: r.receipt } : { status: 'failed', error: { code: 'not_found', message: `verification by ${o.actor}: the service has no record of it`, delivery: 'not_sent' } },
        settle: { by: 'status_query', actor: o.actor },
      });
      out.settled.push({ effectId: e.id, status: r.kind === 'found' ? 'confirmed' : 'failed', how: r.kind === 'found' ? 'verified' : 'not-found' });
    }
  }
  const label = `reconcile.${o.action}`;
  const reason = `${o.action === 'verify' ? 'verified' : 'accepted'} by ${o.actor}: ${out.settled.map((s) => `${s.effectId} ${s.status}`).join(', ') || 'nothing to settle'}`;
  if (out.open.length > 0) {
    if (writes.length) await commitOrThrow(d, run, { label, actor: o.actor, effects: writes });
    return out;
  }
  const waiting = (await d.store.listTasks({ runId, statuses: ['waiting'] })).filter((t) => t.wait?.signal === 'reconcile');
  const move: RunTransitionInput = { runId, from: 'needs_reconciliation', to: 'reconciling', actor: o.actor, reason };
  if (waiting.length > 0) {
    // The first delivery carries the receipts and the run's move; the others only resume their task.
    const payload: Json = { action: o.action === 'accept' ? 'accept' : 'verified', by: o.actor };
    const [first, ...rest] = waiting;
    if (!(await d.kernel.deliver(first!.id, 'reconcile', payload, { actor: o.actor, effects: writes, runTransitions: [move] }))) {
      throw new BerthError('reconcile_conflict', `run ${runId} changed meanwhile`, { retryable: true, ids: { runId } });
    }
    for (const t of rest) await d.kernel.deliver(t.id, 'reconcile', payload, { actor: o.actor });
    out.resumed = true;
    return out;
  }
  const root = run.rootTaskId ? await d.store.getTask(run.rootTaskId) : undefined;
  if (!root || root.status !== 'terminal') {
    if (writes.length) await commitOrThrow(d, run, { label, actor: o.actor, effects: writes });
    return out;
  }
  const to = root.outcome === 'ok' ? 'completed' : root.outcome === 'cancelled' ? 'cancelled' : 'failed';
  await commitOrThrow(d, run, { label, actor: o.actor, effects: writes, runTransitions: [move, { runId, from: 'reconciling', to, actor: o.actor, reason: `root task ended ${root.outcome}; every effect settled` }] });
  out.resumed = true;
  return out;
}

async function verifyOne(d: ReconcileDeps, e: Effect, signal: AbortSignal): Promise<{ kind: 'found'; receipt: Json } | { kind: 'not-found' } | { kind: 'open'; reason: string }> {
  const verifier = d.registry.verifier(e.kind);
  if (!verifier) return { kind: 'open', reason: `no verifier for effect kind ${e.kind} in this host; --accept or --fail apply` };
  try {
    const v = await verifier(e, signal);
    return v.done ? { kind: 'found', receipt: v.receipt } : { kind: 'not-found' };
  } catch (err) {
    return { kind: 'open', reason: `verification failed: ${err instanceof Error ? err.message : String(err)}` };
  }
}

async function commitOrThrow(d: ReconcileDeps, run: Run, c: { label: string; actor: string; effects: EffectWrite[]; runTransitions?: RunTransitionInput[] }): Promise<void> {
  const r = await d.store.commit({ sessionId: run.sessionId, ...c });
  if (!r.ok) throw new BerthError('reconcile_conflict', `run ${run.id} changed meanwhile: ${r.conflict.kind}`, { retryable: true, ids: { runId: run.id }, details: r.conflict });
}

/** Resolves when the run is final, or back in needs_reconciliation after having left it. */
export async function waitAfterReconcile(d: Pick<ReconcileDeps, 'kernel' | 'store'>, runId: string, signal?: AbortSignal): Promise<Run> {
  const run = await d.store.getRun(runId);
  if (run && isFinalRunState(run.state)) return run;
  return d.kernel.waitForRun(runId, { signal, states: ['completed', 'failed', 'cancelled', 'compensated'] });
}
