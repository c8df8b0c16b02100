import { BerthError } from '../host/errors';
import type { ManifestIssue } from './issues';
import type { Environment } from './schema';

/**
 * Refuses what the schema accepts but this version of Berth cannot enforce yet. Kept apart from
 * the schema so that manifests written for later versions keep their shape and fingerprint.
 */
export function checkSupported(env: Environment): void {
  if (env.network.mode === 'open') {
    const issue: ManifestIssue = {
      path: 'network.mode',
      expected: '"none" or "allowlist" (open is not supported yet)',
      found: JSON.stringify(env.network.mode),
      message: 'network.mode "open" is not supported yet',
    };
    throw new BerthError('manifest_unsupported', 'network.mode: "open" is not supported yet; use "allowlist" with the hosts the sandbox needs, or "none"', {
      details: { issues: [issue] },
    });
  }
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
