import { checkEngineCapacity, type Environment } from '../../environment';
import { loadPlan, runSteps, submitPlan, type LoadedPlan, type PlanRunInput } from '../plan';
import type { Run } from '../model';
import type { HostRuntime } from '../runtime/host-runtime';
import { engineCapacity } from '../sandbox';
import { startHost, takeRun } from './drive';
import { checkImageOnEngine, checkPlanSecrets } from './preflight';
import { hostRuntime, leaseTtlMs, type RuntimeOptions, type RuntimeParts } from './runtime';
import type { HostParts } from './assemble';
import { timed } from '../snapshot/timing';

/** A plan file, or one already loaded. */
export type PlanSource = string | LoadedPlan;

/**
 * Loads the plan and checks everything checkable before a run exists (a run is created only to
 * be driven): the engine's capacity for the limits, the pinned image on this engine, the secrets.
 */
export async function preparePlan(p: HostParts, plan: PlanSource): Promise<LoadedPlan> {
  return timed(p.logger, 'preflight', async () => {
    const loaded = typeof plan === 'string' ? await loadPlan(plan) : plan;
    // Before anything is submitted: the engine's own error for these would come at container create.
    // Both engine questions at once; the capacity's answer is still the one reported first.
    const [capacity, image] = await Promise.allSettled([engineCapacity(p.docker), checkImageOnEngine(p.docker, loaded.environment as Environment & { image: { digest: string } }, loaded.environmentFile)]);
    if (capacity.status === 'rejected') throw capacity.reason;
    checkEngineCapacity(loaded.environment, capacity.value);
    if (image.status === 'rejected') throw image.reason;
    await checkPlanSecrets(loaded);
    return loaded;
  });
}

/** Saves the run (admitted) for a worker and returns at once: nothing is driven here. Same request id, same run. */
export async function submitDetached(p: RuntimeParts, loaded: LoadedPlan, o: { requestId?: string; tags?: string[] } = {}) {
  const rt = hostRuntime(p, { claim: 'none', ttlMs: leaseTtlMs(undefined) });
  return submitPlan(rt, loaded, o.requestId, o.tags ?? []);
}

/**
 * Starts a host that owns the plan's new run (a run submitted before with the same request id
 * is taken as its owner, like a resume); the caller drives `rt` on.
 */
export async function startPlan(p: RuntimeParts, loaded: LoadedPlan, o: { requestId?: string } & Omit<RuntimeOptions, 'claim'> = {}): Promise<{ rt: HostRuntime; run: Run; created: boolean; swept: number }> {
  const { rt, swept } = await startHost(p, o);
  const { run, created } = await timed(p.logger, 'submit', () => submitPlan(rt, loaded, o.requestId));
  if (!created) await takeRun(p, rt, run);
  return { rt, run, created, swept };
}

/** The number of steps of a plan run (the acceptance command counts as the last one). */
export async function stepCount(p: HostParts, run: Run): Promise<number> {
  const root = run.rootTaskId ? await p.store.getTask(run.rootTaskId) : undefined;
  const plan = (root?.input as unknown as PlanRunInput | undefined)?.plan;
  return plan?.steps ? runSteps(plan).length : 0;
}
