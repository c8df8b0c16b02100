import { BerthError } from '../errors';

/**
 * The resolved view of an environment manifest that the adapter needs, and nothing more.
 * Sizes and durations are already numbers with the unit in the name; the manifest package
 * maps onto this type so the sandbox never depends on it.
 */
export interface SandboxSpec {
  /** Image id on this engine (`sha256:` + 64 hex), as pinned by `berth env lock`. */
  imageDigest: string;
  /** The human reference the digest was resolved from; informational only. */
  imageRef: string;
  envFingerprint: string;
  workspace: {
    /** Absolute path inside the container; every file operation is confined to it. */
    path: string;
    /** Numeric `uid:gid` that owns the workspace and runs commands by default. */
    owner: string;
  };
  resources: {
    cpus: number;
    memoryMb: number;
    pids: number;
    /** Bound on the container's writable layer; see host/sandbox/README.md for the mechanism. */
    diskMb: number;
    commandTimeoutS: number;
  };
  lease: { ttlS: number; heartbeatS: number };
  /**
   * `none`: no interface. `allowlist`: an internal network whose only way out is the host's egress
   * proxy, which allows the listed `host:port` patterns (a target at a private or host address only
   * when its pattern is one of `overrides`, the manifest's `network.allowOverride`).
   * `open`: a network of its own with a route out; the host, the link-local range and this
   * machine's LANs stay closed except `hostOpenings` (addresses of the host or in those ranges).
   */
  network: SandboxNetworkSpec;
}

/** The network side of a {@link SandboxSpec}. */
export type SandboxNetworkSpec =
  | { mode: 'none' }
  | { mode: 'allowlist'; allow: string[]; overrides: string[]; gateway?: SandboxGatewaySpec }
  | { mode: 'open'; hostOpenings: Array<{ address: string; port: number }> };

/**
 * The model gateway of an allowlist sandbox (manifest `gateway`): served on the egress proxy's
 * address, forwarded by the host. `key` says where the host reads the provider key; the value is
 * never part of a spec.
 */
export interface SandboxGatewaySpec {
  providerBaseUrl: string;
  key: { env: string } | { file: string };
  models: string[];
  budgetTokens: number | null;
}

const PINNED_DIGEST = /^sha256:[0-9a-f]{64}$/;
const OWNER = /^(\d+):(\d+)$/;

/** True when `digest` is an image id this adapter accepts (never a tag, never a short id). */
export function isPinnedDigest(digest: string): boolean {
  return PINNED_DIGEST.test(digest);
}

/** The numeric owner of the workspace. */
export function parseOwner(owner: string): { uid: number; gid: number } {
  const m = OWNER.exec(owner);
  if (!m) throw new BerthError('invalid_spec', `workspace.owner must be a numeric uid:gid, got "${owner}"`);
  return { uid: Number(m[1]), gid: Number(m[2]) };
}

/**
 * Refuses a spec the adapter cannot honour. Checked before any engine call so that a bad manifest
 * never leaves a half-created container behind.
 */
export function checkSpec(spec: SandboxSpec): void {
  if (!isPinnedDigest(spec.imageDigest)) {
    throw new BerthError('image_not_pinned', `image digest must be sha256: followed by 64 hex digits, got "${spec.imageDigest}"`, {
      details: { imageRef: spec.imageRef, imageDigest: spec.imageDigest },
    });
  }
  if (!['none', 'allowlist', 'open'].includes(spec.network.mode)) {
    throw new BerthError('invalid_spec', `network mode "${String((spec.network as { mode: unknown }).mode)}" is not supported by the sandbox adapter yet`);
  }
  const ws = spec.workspace.path;
  if (!ws.startsWith('/') || ws === '/' || ws.split('/').some((p) => p === '..' || p === '.')) {
    throw new BerthError('invalid_spec', `workspace.path must be an absolute, normalised path below /, got "${ws}"`);
  }
  parseOwner(spec.workspace.owner);
  const r = spec.resources;
  const positive: Array<[string, number]> = [
    ['cpus', r.cpus],
    ['memoryMb', r.memoryMb],
    ['pids', r.pids],
    ['diskMb', r.diskMb],
    ['commandTimeoutS', r.commandTimeoutS],
    ['lease.ttlS', spec.lease.ttlS],
    ['lease.heartbeatS', spec.lease.heartbeatS],
  ];
  for (const [name, value] of positive) {
    if (!Number.isFinite(value) || value <= 0) throw new BerthError('invalid_spec', `${name} must be a positive number, got ${value}`);
  }
  // Docker refuses memory limits below 6 MiB; say so before the engine does.
  if (r.memoryMb < 6) throw new BerthError('invalid_spec', `memoryMb must be at least 6, got ${r.memoryMb}`);
}
