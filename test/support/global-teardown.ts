import Dockerode from 'dockerode';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';

/**
 * After the whole run: removes the store markers (host/sandbox/store-marker.ts) that a `berth
 * import` into a test's temporary store left, once that store's file is gone. Tests that import
 * outside the plan fixture (record-five-emails, run-record-contract, ...) left one volume per run.
 * Only markers of stores under the temporary directory whose file no longer exists; never throws
 * (a clean-up must not fail a suite that passed).
 */
export default function setup(): () => Promise<void> {
  return async () => {
    try {
      const docker = new Dockerode();
      const r = (await docker.listVolumes({ filters: { label: ['berth.store.marker'] } })) as { Volumes?: Array<{ Name: string; Labels?: Record<string, string> | null }> | null };
      for (const v of r.Volumes ?? []) {
        const at = v.Labels?.['berth.store.location'];
        if (at && at.startsWith(`${tmpdir()}/`) && !existsSync(at)) await docker.getVolume(v.Name).remove().catch(() => {});
      }
    } catch {
      // No engine here: nothing of ours to remove.
    }
  };
}
