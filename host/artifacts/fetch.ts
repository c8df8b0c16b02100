import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, rename, unlink } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { BerthError } from '../errors';
import { makeDirectories } from '../support/make-dirs';
import type { StoredArtifact } from '../store';
import type { ArtifactStore } from './artifact-store';
import { hashing } from './local-store';

/** What happened to one artifact on fetch. */
export interface FetchedArtifact {
  path: string;
  sha256: string;
  status: 'fetched' | 'missing' | 'altered';
}

/**
 * Copies artifacts from the store to `outDir/<path>`, hashing on the way: a file appears under its
 * name only when its bytes hash to the committed sha256 and size (written beside it first, then
 * renamed); a missing or altered blob is reported and leaves nothing behind. A recorded path that
 * would land outside `outDir` is refused (records hold workspace-relative paths without `..`).
 */
export async function fetchArtifacts(store: ArtifactStore, records: readonly StoredArtifact[], outDir: string, signal?: AbortSignal): Promise<FetchedArtifact[]> {
  const root = resolve(outDir);
  const out: FetchedArtifact[] = [];
  if (records.length > 0) makeDirectories(root, 'output_unwritable', `the artifacts directory ${root}`);
  for (const a of records) {
    const dest = resolve(root, a.path);
    const rel = relative(root, dest);
    if (pathProblem(a.path) || rel.startsWith(`..${sep}`) || rel === '..' || rel === '') {
      throw new BerthError('path_escape', `artifact path "${a.path}" would land outside ${root}`, { details: { path: a.path } });
    }
    let source;
    try {
      source = await store.open(a.sha256);
    } catch (err) {
      if (err instanceof BerthError && err.code === 'artifact_missing') {
        out.push({ path: a.path, sha256: a.sha256, status: 'missing' });
        continue;
      }
      throw err;
    }
    await mkdir(dirname(dest), { recursive: true });
    const tmp = join(dirname(dest), `.${randomBytes(6).toString('hex')}.berth-partial`);
    const h = hashing();
    try {
      await pipeline(source, h, createWriteStream(tmp, { flags: 'wx', mode: 0o644 }), { signal });
      const d = h.digest();
      if (d.sha256 !== a.sha256 || d.size !== a.sizeBytes) {
        await unlink(tmp);
        out.push({ path: a.path, sha256: a.sha256, status: 'altered' });
        continue;
      }
      // The mode it had in the sandbox (a test binary stays executable); 0644 when not recorded.
      await chmod(tmp, a.mode ?? 0o644);
      await rename(tmp, dest);
      out.push({ path: a.path, sha256: a.sha256, status: 'fetched' });
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
  }
  return out;
}

/**
 * Whether a recorded path is not one Berth writes: empty, absolute, with a NUL, an empty or a `..`
 * component. A file name may hold any other character, a newline or a backslash included (the
 * record's rule, host/record/schema.ts), and the sandbox's files are named so.
 */
function pathProblem(path: string): boolean {
  if (path.length === 0 || path.includes('\0') || path.startsWith('/')) return true;
  return path.split('/').some((p) => p === '' || p === '..');
}
