import type { WorkspaceManifest } from './manifest';
import type { Listing } from './scan';

/** Equal when every path has the same stat fields and the same manifest value. */
export function sameListing(a: Listing, b: Listing): boolean {
  if (a.stats.size !== b.stats.size) return false;
  for (const [path, s] of a.stats) if (b.stats.get(path)?.key !== s.key || b.manifest[path] !== a.manifest[path]) return false;
  return true;
}

/** Paths whose value differs between two manifests, or that only one of them has. */
export function changedPaths(before: WorkspaceManifest, now: WorkspaceManifest): string[] {
  const out: string[] = [];
  for (const [p, v] of Object.entries(now)) if (before[p] !== v) out.push(p);
  for (const p of Object.keys(before)) if (!(p in now)) out.push(p);
  return out;
}
