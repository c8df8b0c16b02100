import { fingerprint, requireLocked, type Environment } from '../../environment';
import type { SandboxSpec } from '../sandbox';

/** The sandbox adapter's view of a pinned environment manifest. */
export function sandboxSpecOf(env: Environment): SandboxSpec {
  requireLocked(env);
  return {
    imageDigest: env.image.digest,
    imageRef: env.image.ref,
    envFingerprint: fingerprint(env),
    workspace: { path: env.workspace.path, owner: env.workspace.owner },
    resources: {
      cpus: env.resources.cpus,
      memoryMb: env.resources.memoryMb,
      pids: env.resources.pids,
      diskMb: env.resources.diskMb,
      commandTimeoutS: env.resources.commandTimeoutS,
    },
    lease: { ttlS: env.lease.ttlS, heartbeatS: env.lease.heartbeatS },
    network: env.network.mode === 'allowlist' ? { mode: 'allowlist', allow: [...env.network.allow], allowPrivate: env.network.allowOverride === true } : { mode: 'none' },
  };
}
