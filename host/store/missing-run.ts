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

/**
 * `session_not_found` for an agent session `id`, saying what it names instead when it is a run id
 * or the session of a run of another kind (a plan run's session cannot be chatted with or forked by turn).
 */
export async function sessionNotFound(store: Store, id: string): Promise<BerthError> {
  const hint = await notAgentSession(store, id).catch(() => undefined);
  return new BerthError('session_not_found', `no agent session ${id} in ${store.location}${hint ? `: ${hint}` : ' (see berth status)'}`, { ids: { sessionId: id } });
}

async function notAgentSession(store: Store, id: string): Promise<string | undefined> {
  if (id.startsWith('run_')) {
    const run = await store.getRun(id);
    if (run) return `${id} is a ${run.kind} run${run.kind === 'agent' ? `; its session is ${run.sessionId}` : ''}`;
  }
  if (id.startsWith('ses_') && (await store.getSession(id))) {
    const runs = await store.listRuns({ sessionId: id });
    const kinds = [...new Set(runs.map((r) => r.kind))];
    if (runs.length && !kinds.includes('agent')) return `${id} is the session of ${kinds.join('/')} run ${runs.map((r) => r.id).join(', ')}, not of an agent (berth fork RUN --at STEP forks a plan run)`;
  }
  return undefined;
}
