/** Step artifacts: files a plan step declares, copied out of its sandbox into a content-addressed store (README.md). */
export type { ArtifactStore, BlobState } from './artifact-store';
export { LocalArtifactStore, digestOf, hashing } from './local-store';
export { RegistryArtifactStore } from './registry-store';
export { globProblem, globRegExp, globRoot } from './glob';
export { collectArtifacts, DEFAULT_ARTIFACT_LIMITS, type ArtifactLimits, type CollectedArtifact, type SkippedArtifact } from './collect';
export { currentArtifacts, verifyArtifacts, describeProblem, type ArtifactProblem } from './current';
export { fetchArtifacts, type FetchedArtifact } from './fetch';
