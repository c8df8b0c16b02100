export { manifestDigest, type WorkspaceManifest } from './manifest';
export { listWorkspace, parseListing, changedOutside, type ScanExec, type Listing, type StatEntry } from './scan';
export { manifestFromTar } from './tar-manifest';
export { Snapshotter, type SnapshotEngine, type SnapshotTarget, type WorkspaceState, type TakenSnapshot } from './snapshotter';
export { pruneSnapshots, type PruneDeps } from './retention';
export { timed } from './timing';
export { removeOrphanSnapshots, assertKeepAllowed, type OrphanDeps, type RemovedOrphan, type SnapshotImageSeen } from './orphans';
export { SnapshotTransport, SNAPSHOT_REPOSITORY, type RegistryCalls, type PushTarget, type Fetched, deleteManifest, deletePrunedManifests, type ManifestGcDeps, type ManifestGcReport } from './registry';
