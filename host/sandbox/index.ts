/**
 * The sandbox adapter: the only module that imports dockerode. See README.md for what it
 * guarantees.
 */
export { createSandboxHost, SandboxHost, type SandboxHostOptions, type LeaseOptions, type ProvisionedContainer } from './sandbox-host';
export { Lease } from './lease';
export type { EarlierCommand, EarlierCommands } from './earlier-commands';
export { CONTROL_DIR, GATEWAY_KEY_PLACEHOLDER } from './container-options';
export { createWarmPool, WarmPool, type WarmPoolOptions } from './warm-pool';
export { checkSpec, isPinnedDigest, parseOwner, type SandboxSpec, type SandboxNetworkSpec, type SandboxGatewaySpec } from './sandbox-spec';
export type { ExecOptions, ExecResult, OutputStream } from './exec-types';
export type { ExecUsage } from './exec-usage';
export type { DirEntry } from './file-ops';
export type { VerifyResult, VerifyFailure } from './verify';
export type { DiskGuardOptions } from './disk-guard';
export type { LeaseRecord, LeaseRecords, SweepRecord } from './lease-records';
export type { EgressSweep } from './sandbox-network';
export { assertImagePresent, resolveImageDigest } from './image';
export { containerCreateOptions } from './container-options';
export { LABEL, containerLabels, SERVER_STORE_LOCATION } from './labels';
export { storeOrphans, type OrphanFindings, type OrphanRule, type OrphanStore, type OrphanStoreState } from './store-orphans';
export { snapshotEngine, SNAPSHOT_REPO, type SnapshotEngineCalls, type CommittedImage, type Change } from './snapshot-image';
export { readImageFilesByDigest, type ImageFiles } from './image-files';
export { engineCapacity } from './engine-capacity';
export { scanHostDir, packHostDir, type SkippedEntry } from './archive-pack';
export { registryEngine, registryAuth, pushImage, pullImage, registryError, type RegistryEngine, type PushedImage } from './registry';
export type { TreeFile, RealFile } from './artifact-files';
export { newDockerClient } from './docker-client';
