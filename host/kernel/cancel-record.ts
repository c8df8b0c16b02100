import type { Json } from '../model';
import type { EffectWrite, Store } from '../store';

/** Where a cancelled task's work stopped relative to its effects (seed 004, invariant 5). */
export type CancelPoint = 'before' | 'after' | 'unknown';

/**
 * What a task stopped by cancel leaves as its result, the same whichever host (or none) was
 * running it: `before` when none of its effects started, `after` when they all happened,
 * `unknown` when one may or may not have. An effect still `executing` (its action was cut off,
 * or the host that ran it died) becomes `unknown` in the same commit.
 */
export async function cancelRecord(store: Store, taskId: string, pending: readonly EffectWrite[]): Promise<{ result: Json; effects: EffectWrite[] }> {
  const after = new Map(pending.filter((p) => p.set?.status).map((p) => [p.id, p.set!.status!]));
  const effects: EffectWrite[] = [];
  const statuses = new Map<string, string>();
  for (const e of await store.listEffects({ taskId })) {
    let status = after.get(e.id) ?? e.status;
    if (status === 'executing' && !after.has(e.id)) {
      effects.push({ id: e.id, expectStatus: 'executing', set: { status: 'unknown', error: { code: 'cancelled_in_flight', message: 'cancelled while the action was in flight' } } });
      status = 'unknown';
    }
    statuses.set(e.id, status);
  }
  for (const [id, status] of after) statuses.set(id, status);
  const touched = [...statuses].filter(([, s]) => s !== 'intended');
  const point: CancelPoint = touched.some(([, s]) => s === 'unknown' || s === 'executing') ? 'unknown' : touched.some(([, s]) => s === 'confirmed') ? 'after' : 'before';
  return { result: { cancelled: { effect: point, effectIds: touched.map(([id]) => id) } }, effects };
}
