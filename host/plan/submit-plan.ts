import { checkEgressPolicy, networkRunRecords } from '../../environment';
import { submit, type Kernel, type HandlerRegistry, type Submitted } from '../kernel';
import { plainJson } from '../model';
import type { Store } from '../store';
import { KERNEL } from '../version';
import { newId } from '../support';
import { PLAN_KIND } from './handlers';
import type { LoadedPlan } from './load-plan';
import { PlanRunInputSchema, type PlanRunInput } from './plan-input';

/**
 * Submits a loaded plan as a new run. Each call without a request id is a new run; pass the same
 * `requestId` to make a retried submit return the first run instead.
 */
export async function submitPlan(deps: { store: Store; kernel: Kernel; registry: HandlerRegistry }, loaded: LoadedPlan, requestId?: string, tags: string[] = []): Promise<Submitted> {
  const input: PlanRunInput = {
    planFile: loaded.file,
    plan: loaded.plan,
    environment: loaded.environment,
    envFingerprint: loaded.envFingerprint,
    workspaceDir: loaded.workspaceDir,
  };
  const id = requestId ?? newId('req');
  // Open mode and an overridden allow list were accepted by loadPlan; every run relying on them
  // says so. Checked again here: what a name resolves to is the host's answer at submission.
  const entries = networkRunRecords(loaded.environment, await checkEgressPolicy(loaded.environment)).map((r) => ({ kind: r.kind, body: plainJson(r.body) }));
  return submit(deps, {
    requestId: id,
    runKind: 'plan',
    // Stored as its kind's schema produces it: the plan task parses the same shape before every phase.
    root: { kind: PLAN_KIND, input: plainJson(PlanRunInputSchema.parse(input)) },
    versions: { kernel: `${KERNEL.name}@${KERNEL.version}`, envFingerprint: loaded.envFingerprint, imageDigest: loaded.environment.image.digest },
    // Tags (`--detach --tags`): only a worker that has every one of them claims the run.
    sessionMeta: { plan: loaded.file, name: loaded.plan.name ?? null, ...(tags.length ? { tags } : {}) },
    entries,
  });
}
