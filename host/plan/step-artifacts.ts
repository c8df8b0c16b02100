import { collectArtifacts, type ArtifactStore, type CollectedArtifact, type SkippedArtifact } from '../artifacts';
import { isBerthError, type ErrorIds } from '../errors';
import type { Lease } from '../sandbox';
import type { PlanStep } from './plan-schema';
import type { PlanRunInput } from './plan-input';

/** What a step's artifacts came to: copied, or refused with a reason that fails the step. */
export type StepArtifacts = { kind: 'ok'; files: CollectedArtifact[]; skipped: SkippedArtifact[] } | { kind: 'refused'; error: { code: string; message: string } };

/**
 * Copies a finished step's declared artifacts into the store. A refusal the operator must fix
 * (a path leaving the workspace, limits, a secret, a glob matching nothing) is a value that fails
 * the step; an engine failure is thrown, so the phase is retried and the copy (content-addressed)
 * simply runs again.
 */
export async function stepArtifacts(
  lease: Lease,
  o: { step: PlanStep; input: PlanRunInput; store: ArtifactStore | undefined; ids: ErrorIds; signal?: AbortSignal },
): Promise<StepArtifacts> {
  if (!o.store) {
    return { kind: 'refused', error: { code: 'artifact_store_missing', message: `step ${o.step.name} declares artifacts but this host has no artifact store` } };
  }
  try {
    const r = await collectArtifacts(lease, {
      step: o.step.name,
      globs: o.step.artifacts,
      limits: o.input.plan.artifactLimits,
      store: o.store,
      secrets: o.input.environment.secrets,
      ids: o.ids,
      signal: o.signal,
    });
    return { kind: 'ok', ...r };
  } catch (err) {
    if (isBerthError(err) && !err.retryable && /^artifact_|^path_escape$|^not_a_file$/.test(err.code)) return { kind: 'refused', error: { code: err.code, message: err.message } };
    throw err;
  }
}
