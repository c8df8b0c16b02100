import type { Effect, Json, Task } from '../model';
import type { TaskHandler } from './handler';
import type { EffectWrite, Store } from '../store';

/** Where a cancelled task's work stopped relative to its effects (seed 004, invariant 5). */
export type CancelPoint = 'before' | 'after' | 'unknown';

/**
 * What a task stopped by cancel leaves as its result, the same whichever host (or none) was
 * running it: `before` when none of the effects of its work started, `after` when they all
 * happened, `unknown` when one may or may not have. Its work is its own effects and those of every
 * task under it (a root that sent two emails through its children did not stop `before`). An
 * effect of its own still `executing` (its action was cut off, or the host that ran it died)
 * becomes `unknown` in the same commit (or `failed`, not applied, when its kind's `settleOnCancel`
 * proves it changed nothing outside the run); one of a descendant is left to that task's own
 * cancel. A returned write replaces the caller's pending write of the same effect.
 */
export async function cancelRecord(store: Store, task: Task, pending: readonly EffectWrite[], handler?: Pick<TaskHandler, 'settleOnCancel'>): Promise<{ result: Json; effects: EffectWrite[] }> {
  const after = new Map(pending.filter((p) => p.set?.status).map((p) => [p.id, p.set!.status!]));
  const effects: EffectWrite[] = [];
  const statuses = new Map<string, string>();
  for (const e of await workEffects(store, task)) {
    let status = after.get(e.id) ?? e.status;
    // Its own action cut off by this cancel (still `executing` in the store; the phase may have
    // marked it `unknown` in this same commit): settled here, replacing any write of the phase.
    const cutOff = e.status === 'executing' && e.taskId === task.id && (status === 'executing' || status === 'unknown');
    if (cutOff) {
      const settled = handler?.settleOnCancel ? await handler.settleOnCancel(task, e, { store }) : null;
      if (settled) {
        effects.push({ id: e.id, expectStatus: 'executing', set: { status: 'failed', error: { code: 'cancelled_not_applied', message: settled.reason } }, settle: { by: 'cancel' } });
        status = 'failed';
      } else if (status === 'executing') {
        effects.push({ id: e.id, expectStatus: 'executing', set: { status: 'unknown', error: { code: 'cancelled_in_flight', message: 'cancelled while the action was in flight' } } });
        status = 'unknown';
      }
    }
    statuses.set(e.id, status);
  }
  for (const [id, status] of after) if (!effects.some((w) => w.id === id)) statuses.set(id, status);
  const touched = [...statuses].filter(([, s]) => s !== 'intended');
  const point: CancelPoint = touched.some(([, s]) => s === 'unknown' || s === 'executing') ? 'unknown' : touched.some(([, s]) => s === 'confirmed') ? 'after' : 'before';
  return { result: { cancelled: { effect: point, effectIds: touched.map(([id]) => id) } }, effects };
}

/** The effects of a task and of every task under it, in the store's order. */
async function workEffects(store: Store, task: Pick<Task, 'id' | 'runId'>): Promise<Effect[]> {
  if (!task.runId) return store.listEffects({ taskId: task.id });
  const tasks = await store.listTasks({ runId: task.runId });
  const under = new Set([task.id]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const t of tasks) if (t.parentId && under.has(t.parentId) && !under.has(t.id)) grew = !!under.add(t.id);
  }
  return (await store.listEffects({ runId: task.runId })).filter((e) => e.taskId !== null && under.has(e.taskId));
}
