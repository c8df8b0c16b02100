import { BerthError } from '../errors';
import type { Store } from './store';

/**
 * `run_not_found` for `id`, saying what it names when it is another kind of id of this store (a
 * session, snapshot or task id where a run id was expected: the ids Berth prints beside run ids)
 * and which run to name instead.
 */
export async function runNotFound(store: Store, id: string): Promise<BerthError> {
  const hint = await otherKind(store, id).catch(() => undefined);
  return new BerthError('run_not_found', `no run ${id} in ${store.location}${hint ? `: ${hint}` : ' (see berth status)'}`, { ids: { runId: id } });
}

async function otherKind(store: Store, id: string): Promise<string | undefined> {
  if (id.startsWith('ses_') && (await store.getSession(id))) {
    const runs = (await store.listRuns({ sessionId: id })).map((r) => r.id);
    return `${id} is a session; ${runs.length ? `its runs: ${runs.join(', ')}` : 'it has no run'}`;
  }
  if (id.startsWith('snap_')) {
    const s = await store.getSnapshot(id);
    if (s) return `${id} is a snapshot (${s.checkpoint}) of run ${s.runId ?? `session ${s.sessionId}`}`;
  }
  if (id.startsWith('task_')) {
    const t = await store.getTask(id);
    if (t) return `${id} is a task (${t.kind}) of run ${t.runId ?? `session ${t.sessionId}`}`;
  }
  return undefined;
}
