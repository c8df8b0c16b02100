import { fingerprint, requireLocked, type Environment } from '../../environment';
import type { SandboxNetworkSpec, SandboxSpec } from '../sandbox';

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
    network: networkSpecOf(env.network, env.gateway),
  };
}

function networkSpecOf(n: Environment['network'], g: Environment['gateway']): SandboxNetworkSpec {
  if (n.mode === 'allowlist') {
    const gateway = g && { providerBaseUrl: g.provider.baseUrl, key: g.provider.key, models: [...g.models], budgetTokens: g.budget?.tokens ?? null };
    return { mode: 'allowlist', allow: [...n.allow], overrides: [...(n.allowOverride ?? [])], ...(gateway ? { gateway } : {}) };
  }
  if (n.mode === 'open') {
    // checkSupported let only IPv4:port entries through in open mode.
    return { mode: 'open', hostOpenings: n.allow.map((p) => ({ address: p.slice(0, p.lastIndexOf(':')), port: Number(p.slice(p.lastIndexOf(':') + 1)) })) };
  }
  return { mode: 'none' };
}
