import type { Kernel } from '../kernel';
import { isFinalRunState, type Task } from '../model';
import type { Store } from '../store';

/** The statuses of a task that has not ended. */
export const LIVE: Task['status'][] = ['pending', 'running', 'waiting', 'sleeping', 'completing'];

/** How long a host waits for an ended run's tasks before it leaves them to the next host (a task no handler settles). */
const SETTLE_LIMIT_MS = 120_000;

/**
 * Resolves once the run has no live task left: true, or false when `limitMs` passed first. A run
 * can reach a final state before its tasks do: `reconcile --fail` commits `failed` with a cancel
 * request for the root, which the owner's kernel then carries out. A host that stops driving the
 * run first would leave the root `waiting` in a failed run, so every host that drives an ended run
 * waits here before it stops (checked at each commit of this kernel that touches the run, and
 * every 250 ms for other processes').
 */
export function tasksSettled(store: Pick<Store, 'listTasks'>, kernel: Pick<Kernel, 'onCommit'>, runId: string, limitMs = SETTLE_LIMIT_MS): Promise<boolean> {
  return new Promise((resolve) => {
    let checking = false;
    let over = false;
    const end = (ok: boolean) => {
      if (over) return;
      over = true;
      off();
      clearInterval(iv);
      clearTimeout(limit);
      resolve(ok);
    };
    const check = async () => {
      if (checking || over) return;
      checking = true;
      try {
        if ((await store.listTasks({ runId, statuses: LIVE })).length === 0) end(true);
      } catch {
        // A read refused by a busy store is asked again at the next tick.
      } finally {
        checking = false;
      }
    };
    const off = kernel.onCommit((e) => void (e.runIds.includes(runId) && check()));
    const iv = setInterval(() => void check(), 250);
    const limit = setTimeout(() => end(false), limitMs);
    void check();
  });
}

/**
 * The session's other runs that ended with a task still live (a host killed right after
 * `reconcile --fail` committed one of them): the host that drives any run of the session owns
 * those tasks too and carries their cancel out, so it waits for them as well before it stops
 * (`berth resume B` or `berth cancel B` settle an ended run A of B's session, as gc says).
 */
export async function sessionLeftoversSettled(store: Pick<Store, 'listTasks' | 'getRun'>, kernel: Pick<Kernel, 'onCommit'>, sessionId: string, exceptRunId: string): Promise<void> {
  const runIds = new Set((await store.listTasks({ sessionId, statuses: LIVE })).map((t) => t.runId).filter((id): id is string => id !== null && id !== exceptRunId));
  for (const id of runIds) {
    const run = await store.getRun(id);
    if (run && isFinalRunState(run.state)) await tasksSettled(store, kernel, id);
  }
}
