import { BerthError, type ErrorIds } from '../errors';
import type { Lease, TreeFile } from '../sandbox';
import { checkArtifactSecrets, type SecretDecl } from '../secrets';
import type { ArtifactStore } from './artifact-store';
import { globRegExp, globRoot } from './glob';

/** How many files and how many bytes one step's artifacts may hold (the plan's `artifactLimits`). */
export interface ArtifactLimits {
  files: number;
  mb: number;
}

export const DEFAULT_ARTIFACT_LIMITS: ArtifactLimits = { files: 1000, mb: 1024 };

/** One file copied into the store. */
export interface CollectedArtifact {
  path: string;
  sizeBytes: number;
  sha256: string;
  /** Permission bits in the sandbox (`0o755` for an executable). */
  mode: number;
}

/** A matched path that is not a file to copy (a socket, a symlink to a directory or to nothing), and why. */
export interface SkippedArtifact {
  path: string;
  why: string;
}

export interface CollectOptions {
  step: string;
  globs: readonly string[];
  limits: ArtifactLimits;
  store: ArtifactStore;
  /** The run's declared secrets: no artifact may hold one of their values. */
  secrets: readonly SecretDecl[];
  ids?: ErrorIds;
  signal?: AbortSignal;
}

const refused = (code: string, message: string, o: CollectOptions, details: Record<string, unknown>) =>
  new BerthError(code, `artifacts of step ${o.step}: ${message}`, { ids: o.ids, details: { step: o.step, ...details } });

/** Which listed files each glob matches, each path once (the first glob matching it names it), in path order. */
function match(tree: TreeFile[], o: CollectOptions): Array<TreeFile & { glob: string }> {
  const byPath = new Map<string, TreeFile & { glob: string }>();
  for (const glob of o.globs) {
    const re = globRegExp(glob);
    const hits = tree.filter((f) => re.test(f.path));
    if (hits.length === 0) throw refused('artifact_missing', `glob "${glob}" matched no file in the workspace`, o, { glob });
    for (const f of hits) if (!byPath.has(f.path)) byPath.set(f.path, { ...f, glob });
    if (byPath.size > o.limits.files) {
      throw refused('artifact_limit', `glob "${glob}" takes the artifacts to more than ${o.limits.files} files (the plan's artifactLimits.files)`, o, { glob, limit: o.limits.files });
    }
  }
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Copies the files a step's globs match out of its sandbox into the artifact store, after the
 * step succeeded and before its result is committed. Paths stay in the workspace: the listing
 * follows no symlink, each matched symlink is resolved in the container and one leading outside
 * the workspace refuses the step's artifacts (`artifact_refused`, naming it), and every archive
 * must hold exactly the regular file that was checked. Count and size limits refuse with
 * `artifact_limit` naming the glob or the path, before any byte is copied; the run's secret
 * values are searched for first (`artifact_holds_secret`). Copying is content-addressed, so
 * running it again after a crash stores nothing twice.
 */
export async function collectArtifacts(lease: Lease, o: CollectOptions): Promise<{ files: CollectedArtifact[]; skipped: SkippedArtifact[] }> {
  const roots = new Map<string, number | undefined>();
  for (const g of o.globs) {
    const r = globRoot(g);
    // Several globs under one directory: one listing, as deep as the deepest needs.
    const prev = roots.has(r.dir) ? roots.get(r.dir) : 0;
    roots.set(r.dir, prev === undefined || r.maxDepth === undefined ? undefined : Math.max(prev, r.maxDepth));
  }
  let tree: TreeFile[];
  try {
    tree = await lease.listTree([...roots].map(([dir, maxDepth]) => ({ dir, maxDepth })));
  } catch (err) {
    if (err instanceof BerthError && err.code === 'path_escape') throw refused('artifact_refused', `${err.message}; refused`, o, {});
    throw err;
  }
  const matched = match(tree, o);
  const maxBytes = o.limits.mb * 1024 * 1024;
  const files: Array<{ path: string; real: string; size: number }> = [];
  const skipped: SkippedArtifact[] = [];
  let total = 0;
  for (const m of matched) {
    // The record keeps a path as text, and a name that is not UTF-8 has none that names the file again.
    if (m.unrepresentable !== undefined) {
      throw refused('artifact_refused', `${m.unrepresentable} (glob "${m.glob}") has a name that is not UTF-8, which no artifact record can name; rename it`, o, { glob: m.glob, path: m.unrepresentable });
    }
    let real = m.real;
    let size = m.size;
    if (m.type === 'other') {
      skipped.push({ path: m.path, why: 'not a regular file' });
      continue;
    }
    if (m.type === 'symlink') {
      const r = await lease.realFile(m.path);
      if (!r.ok && r.why === 'escape') {
        throw refused('artifact_refused', `${m.path} (glob "${m.glob}") is a symlink leading outside the workspace (${r.detail}); refused`, o, { glob: m.glob, path: m.path });
      }
      if (!r.ok) {
        skipped.push({ path: m.path, why: r.detail });
        continue;
      }
      real = r.real;
      size = r.size;
    }
    total += size;
    if (total > maxBytes) {
      throw refused('artifact_limit', `${m.path} (${size} bytes, glob "${m.glob}") takes the artifacts over ${o.limits.mb} MB (the plan's artifactLimits.mb)`, o, { glob: m.glob, path: m.path, limitMb: o.limits.mb });
    }
    files.push({ path: m.path, real, size });
  }
  await checkArtifactSecrets(lease, files, o.secrets, { step: o.step, ids: o.ids, signal: o.signal });

  const out: CollectedArtifact[] = new Array(files.length);
  let left = maxBytes;
  let next = 0;
  // Two transfers at once: one streams while the other's blob is fsynced, and many small files
  // are not bound by one round trip each; more only contends on a small host (bench/portable.ts).
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      const f = files[i]!;
      o.signal?.throwIfAborted();
      const put = await lease.copyFileOut(f.real, left, async (data, _size, mode) => ({ ...(await o.store.put(data, { signal: o.signal })), mode }), o.signal);
      left -= put.size;
      if (left < 0) throw refused('artifact_limit', `${f.path} grew to ${put.size} bytes while being copied and took the artifacts over ${o.limits.mb} MB`, o, { path: f.path, limitMb: o.limits.mb });
      out[i] = { path: f.path, sizeBytes: put.size, sha256: put.sha256, mode: put.mode };
    }
  };
  await Promise.all(Array.from({ length: Math.min(2, files.length) }, worker));
  return { files: out, skipped };
}
