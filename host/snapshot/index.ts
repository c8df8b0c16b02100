export { manifestDigest, applyRescan, type WorkspaceManifest } from './manifest';
export { scanWorkspace, parseScan, type ScanExec, type ScanResult } from './scan';
export { Snapshotter, type SnapshotEngine, type SnapshotTarget, type WorkspaceState, type TakenSnapshot } from './snapshotter';
export { pruneSnapshots, type PruneDeps } from './retention';
export { timed } from './timing';
