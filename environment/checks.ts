import { isIP } from 'node:net';
import { BerthError } from '../host/errors';
import type { ManifestIssue } from './issues';
import type { Environment } from './schema';

/**
 * Refuses what the schema accepts but Berth cannot enforce as written. Kept apart from the schema
 * so that manifests keep their shape and fingerprint when a later version learns to enforce more.
 *
 * - `network.allow` with mode `none` would be silently ignored: the sandbox has no interface.
 * - In `open` mode every outside host is reachable already; the list may only name IPv4 addresses
 *   (with a port) open mode closes: this host's own, or ones in the ranges it blocks (link-local,
 *   this machine's LANs), which checkEgressPolicy checks against this machine.
 */
export function checkSupported(env: Environment): void {
  const { mode, allow } = env.network;
  const issues: ManifestIssue[] = [];
  if (mode === 'none' && allow.length > 0) {
    issues.push({
      path: 'network.allow',
      expected: 'no entries with network.mode "none" (or mode "allowlist")',
      found: JSON.stringify(allow),
      message: 'network.allow has no effect when network.mode is "none": the sandbox has no network interface; set mode: allowlist',
    });
  }
  if (mode === 'open') {
    allow.forEach((pattern, i) => {
      const host = pattern.slice(0, pattern.lastIndexOf(':'));
      if (isIP(host) !== 4) {
        issues.push({
          path: `network.allow.${i}`,
          expected: "an IPv4 address with a port (open mode reaches every outside host already; the list opens this host's services or addresses in the ranges open mode blocks)",
          found: JSON.stringify(pattern),
          message: `network.allow.${i}: "${pattern}" is not an IPv4 address; in open mode the list only opens this host's own addresses and addresses in the ranges open mode blocks`,
        });
      }
    });
  }
  if (issues.length === 0) return;
  throw new BerthError('manifest_invalid', issues.map((i) => i.message).join('; '), { details: { issues } });
}

/**
 * Refuses a manifest whose image is not pinned: a sandbox must start from exactly the image the
 * run recorded, and a tag can move. `berth env lock` fills the digest.
 */
export function requireLocked(env: Environment): asserts env is Environment & { image: { digest: string } } {
  if (env.image.digest === undefined) {
    throw new BerthError('manifest_unlocked', `image.digest is missing: the image ${env.image.ref} is not pinned; run \`berth env lock\` to pin it`, {
      details: { ref: env.image.ref },
    });
  }
}
