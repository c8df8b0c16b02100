import type { StoredArtifact } from '../store';
import type { ArtifactStore, BlobState } from './artifact-store';

/**
 * The artifacts that stand for a run now: for each step index below `before`, the records of the
 * newest generation that committed any. A step re-run in a later generation (a rewind, a
 * reconciliation) supersedes what its earlier execution committed; a `never` step reported as
 * already done commits none, so its earlier records stand.
 */
export function currentArtifacts(all: readonly StoredArtifact[], before = Number.POSITIVE_INFINITY): StoredArtifact[] {
  const newest = new Map<number, number>();
  for (const a of all) if (a.stepIndex < before) newest.set(a.stepIndex, Math.max(newest.get(a.stepIndex) ?? -1, a.generation));
  return all.filter((a) => a.stepIndex < before && newest.get(a.stepIndex) === a.generation);
}

/** A committed artifact whose bytes are not in the store as committed. */
export interface ArtifactProblem {
  artifact: StoredArtifact;
  state: Exclude<BlobState, 'present'>;
}

/** Checks every record against the store (presence, size, sha256 of the bytes there). */
export async function verifyArtifacts(store: ArtifactStore, records: readonly StoredArtifact[], signal?: AbortSignal): Promise<ArtifactProblem[]> {
  const problems: ArtifactProblem[] = [];
  for (const a of records) {
    signal?.throwIfAborted();
    const state = await store.check(a.sha256, a.sizeBytes, { signal });
    if (state !== 'present') problems.push({ artifact: a, state });
  }
  return problems;
}

/** "out/lib.a of step build (missing)" for messages. */
export const describeProblem = (p: ArtifactProblem) => `${p.artifact.path} of step ${p.artifact.step} (${p.state} in the artifact store, sha256:${p.artifact.sha256.slice(0, 12)})`;
