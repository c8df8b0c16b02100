import type { BigIntStats } from 'node:fs';
import { ConfinedTree, hasEscapedBytes, nameString } from '../confined';
import { LAYER_CLOCK_MARGIN_MS, type LayerDirs } from '../layer-scan';

/** A directory outside the workspace that a delta layer writes as it is now: empty, with its current metadata. */
export interface OutsideDir {
  /** Container path without the leading slash, as a layer names it (`tmp`). */
  name: string;
  st: BigIntStats;
}

const isRecent = (st: BigIntStats, since: number) => Number(st.ctimeMs) >= since || Number(st.mtimeMs) >= since;

/**
 * What changed in the container outside the workspace since `sinceMs` (host ms), when a delta
 * layer can hold all of it: directories that are empty both in the writable layer and in the
 * container's view (a compiler's `/tmp` once its temporary files are gone: every gcc step leaves
 * exactly that). A layer writes each as an opaque empty directory with its current mode, owner and
 * time, which is exactly what the container shows, whatever the image below held there.
 *
 * `undefined` when anything else changed there since (a file, a link, a removal's whiteout, a
 * directory with content in either view) or when the layer cannot be read here: the engine's
 * commit keeps that. A directory with content cannot be written as a delta without knowing what the
 * parent image holds below it (a removal from an earlier layer leaves no trace in this one).
 *
 * Both views are walked by directory descriptors (host/snapshot/confined): a directory the sandbox
 * swapped for a link is a link here, never followed.
 */
export function emptyDirsOutside(dirs: LayerDirs, ws: string, sinceMs: number): OutsideDir[] | undefined {
  const skipped = `.${ws.replace(/\/+$/, '')}`;
  const since = Math.floor(sinceMs) - LAYER_CLOCK_MARGIN_MS;
  const upper = ConfinedTree.at(dirs.upper, '');
  if (!upper) return undefined;
  const merged = ConfinedTree.at(dirs.merged, '');
  if (!merged) {
    upper.close();
    return undefined;
  }
  try {
    const out: OutsideDir[] = [];
    const stack = ['.'];
    while (stack.length) {
      const dir = stack.pop()!;
      const names = upper.children(dir);
      if (!names) return undefined;
      for (const n of names) {
        const path = `${dir}/${nameString(n)}`;
        if (path === skipped) continue;
        const st = upper.lstat(path);
        if (!st) return undefined;
        if (!isRecent(st, since)) {
          // Older than the base image's state: already in it (as the walk that accepted that base saw).
          if (st.isDirectory()) stack.push(path);
          continue;
        }
        if (!st.isDirectory() || hasEscapedBytes(path)) return undefined;
        if (upper.children(path)?.length !== 0) return undefined;
        const now = merged.lstat(path);
        if (!now?.isDirectory() || merged.children(path)?.length !== 0) return undefined;
        out.push({ name: path.slice(2), st: now });
        if (out.length > 64) return undefined;
      }
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } catch {
    return undefined;
  } finally {
    upper.close();
    merged.close();
  }
}

/** Whether two readings of the outside found the same directories with the same stat fields (nothing moved in between). */
export function sameOutside(a: OutsideDir[], b: OutsideDir[]): boolean {
  return a.length === b.length && a.every((d, i) => d.name === b[i]!.name && d.st.mode === b[i]!.st.mode && d.st.uid === b[i]!.st.uid && d.st.gid === b[i]!.st.gid && d.st.mtimeNs === b[i]!.st.mtimeNs && d.st.ctimeNs === b[i]!.st.ctimeNs && d.st.ino === b[i]!.st.ino);
}
