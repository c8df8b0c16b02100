/**
 * The sandbox binding of a durable run, shared by plan runs and agent runs: leasing, verifying
 * on resume, restoring from snapshots and snapshotting at checkpoints, and the run's sandbox
 * pointer document that records which lease and snapshot are current.
 */
export { RunSandbox, type RunSandboxDeps, type Ensured, type Behind, type NewSnapshotRecord, type SandboxVerification } from './run-sandbox';
export { sandboxDocType, sandboxDocId, SANDBOX_DOC, SandboxPointer } from './sandbox-doc';
