export { deleteManifest, parseManifestRef, type RegistryAuth, type ManifestDeleteOutcome } from './manifest-delete';
export { deletePrunedManifests, type ManifestGcDeps, type ManifestGcReport } from './manifest-gc';
export { SnapshotTransport, SNAPSHOT_REPOSITORY, BASE_REPOSITORY, type RegistryCalls, type PushTarget, type Fetched } from './transport';
export { pushWaitMs, pushWithRetry, PushWaitSpent, DEFAULT_PUSH_WAIT_MS } from './push-retry';
export { manifestPresent } from './manifest-head';
export { EarlyLayer } from './early-layer';
