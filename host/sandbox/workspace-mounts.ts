import { posix } from 'node:path';
import { BerthError } from '../errors';
import { isWithin } from './workspace-path';

/**
 * Refuses, with `workspace_hidden`, a volume or mount at the workspace, above it or inside it.
 * A volume is not part of the container's writable layer: `docker commit` leaves it out, so every
 * snapshot would hold an empty workspace that still "verifies" (the scan would see the live
 * volume, the restore an empty directory).
 */
export function assertWorkspaceVisible(workspace: string, destinations: Iterable<string>, source: string): void {
  const ws = posix.normalize(workspace).replace(/(.)\/+$/, '$1');
  for (const raw of destinations) {
    const d = posix.normalize(raw).replace(/(.)\/+$/, '$1');
    if (isWithin(d, ws) || isWithin(ws, d)) {
      throw new BerthError('workspace_hidden', `${source} declares a volume or mount at ${d}, which covers the workspace ${ws}: snapshots would not contain the workspace. Use an image without VOLUME there, or another workspace path`, {
        details: { workspace: ws, mount: d },
      });
    }
  }
}
