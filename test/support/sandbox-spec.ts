import type { SandboxSpec } from '../../host/sandbox';

/** A spec for berth/tiny with generous limits; tests override what they exercise. */
export function tinySpec(
  imageId: string,
  over: { resources?: Partial<SandboxSpec['resources']>; lease?: Partial<SandboxSpec['lease']>; envFingerprint?: string } = {},
): SandboxSpec {
  return {
    imageDigest: imageId,
    imageRef: 'berth/tiny:latest',
    envFingerprint: over.envFingerprint ?? 'sha256:' + 'e'.repeat(64),
    workspace: { path: '/workspace', owner: '1000:1000' },
    resources: { cpus: 1, memoryMb: 256, pids: 128, diskMb: 512, commandTimeoutS: 60, ...over.resources },
    lease: { ttlS: 300, heartbeatS: 30, ...over.lease },
    network: { mode: 'none' },
  };
}
