import { BerthError } from '../errors';
import type { Effect, Task } from '../model';
import type { Store } from '../store';
import type { RunSandbox } from '../run-sandbox';
import type { PlanRunInput, StepInput } from './plan-input';

/**
 * Stops the command a step left running in the sandbox when the host running it died, before
 * the step's cancel is recorded: every process of the sandbox's command user is killed (the run is
 * being cancelled, so nothing of it may go on), in each live sandbox of the run's session. A
 * sandbox that is gone has nothing left to stop; an engine that cannot be reached throws, so the
 * cancel waits rather than recording a step whose command may still act.
 */
export async function stopAbandonedStep(sb: RunSandbox, task: Task, d: { store: Store; signal: AbortSignal }): Promise<void> {
  const { index, generation } = task.input as unknown as StepInput;
  const runId = task.runId!;
  const effect = await d.store.getEffect(`${runId}:step:${index}:g${generation}`);
  if (effect?.status !== 'executing') return;
  const root = task.parentId ? await d.store.getTask(task.parentId) : undefined;
  const env = (root?.input as unknown as PlanRunInput | undefined)?.environment;
  if (!env) return;
  for (const record of await d.store.listLeases({ sessionId: task.sessionId })) {
    if (record.releasedAt !== null) continue;
    const v = await sb.verifyRecord(record);
    if (!v.ok) {
      if (v.code === 'engine_unreachable') throw new BerthError('engine_unreachable', `cannot stop step ${index} of run ${runId}: ${v.reason}`, { retryable: true, ids: { runId } });
      continue;
    }
    const lease = await sb.attachRecord(runId, record, env);
    // kill(-1) signals every process the user may signal except the caller and the container's init.
    await lease.exec(['sh', '-c', 'kill -KILL -1 2>/dev/null; exit 0'], { signal: d.signal, timeoutMs: 30_000 });
  }
}

/**
 * A cancelled step's action that was in flight changed nothing outside the run when it may be
 * repeated (`safe`) and ran in a sandbox with no network: what it did is only in the sandbox of a
 * run that is ending. It is settled as not applied, so the cancel ends the run `cancelled` instead
 * of asking an operator a question whose answer cannot matter. Anything else stays `unknown`.
 */
export async function settleCancelledStep(task: Task, effect: Effect, d: { store: Store }): Promise<{ status: 'not_applied'; reason: string } | null> {
  if (effect.replay !== 'safe' || effect.kind !== 'plan.step') return null;
  const root = task.parentId ? await d.store.getTask(task.parentId) : undefined;
  const env = (root?.input as unknown as PlanRunInput | undefined)?.environment;
  if (env?.network.mode !== 'none') return null;
  return { status: 'not_applied', reason: 'cancelled in flight; a safe step in a sandbox with no network changed nothing outside the cancelled run' };
}
