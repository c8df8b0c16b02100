import { createHash } from 'node:crypto';
import { closeSync, constants as fsc, type Dirent, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, type BigIntStats } from 'node:fs';
import { lstat, realpath } from 'node:fs/promises';
import type { WorkspaceManifest } from './manifest';

/** A container's overlay directories on this machine: its writable layer, and its whole filesystem as it sees it. */
export interface LayerDirs {
  upper: string;
  merged: string;
}

/** The margin for the kernel's coarse file clock (one tick, up to 10 ms, behind the host's own reading). */
export const LAYER_CLOCK_MARGIN_MS = 25;

/** What a layer scan found: the workspace manifest now, and the stat fields of every path it looked at. */
export interface LayerListing {
  manifest: WorkspaceManifest;
  /** Path → `mode|size|mtime|ctime|inode` (nanoseconds) of every path this scan stat'ed in the merged view. */
  keys: Map<string, string>;
  /** Children names of every directory this scan listed. */
  children: Map<string, string[]>;
  /** Regular files whose bytes this scan read. */
  hashed: number;
  /** False when a file vanished or changed type between its stat and its read: its value never verifies. */
  complete: boolean;
  /** Host clock (ms) before the scan began: the `since` of the next one. */
  startedAt: number;
}

// The walks use the synchronous calls: thousands of small lstat/readdir calls through the thread
// pool cost ten times as much under load. They yield to the event loop every YIELD_EVERY calls so
// a big layer does not stall the host's other work.
const YIELD_EVERY = 500;
const CHUNK = 1 << 20;
let calls = 0;
const breathe = async () => {
  if (++calls % YIELD_EVERY === 0) await new Promise<void>((r) => setImmediate(r));
};
const lstatOrNone = (path: string): BigIntStats | undefined => {
  try {
    return lstatSync(path, { bigint: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw err;
  }
};

/**
 * The workspace root in the merged view, or `undefined` when it is not a plain directory there
 * (a symlinked workspace resolves against the host's root, not the container's: the caller lists
 * it inside the container instead).
 */
export async function layerWorkspace(dirs: LayerDirs, ws: string): Promise<string | undefined> {
  const path = dirs.merged + ws.replace(/\/+$/, '');
  try {
    // A stopped container's merged directory is unmounted (empty): the workspace is then missing.
    if (!(await lstat(path)).isDirectory() || (await realpath(path)) !== path) return undefined;
    return path;
  } catch {
    return undefined;
  }
}

const keyOf = (st: BigIntStats) => `${st.mode}|${st.size}|${st.mtimeNs}|${st.ctimeNs}|${st.ino}`;
const modeOf = (st: BigIntStats) => (Number(st.mode) & 0o7777).toString(8);
const parentOf = (p: string) => (p === '.' ? '' : p.slice(0, p.lastIndexOf('/')));
const isRacy = (st: BigIntStats, since: number) => Number(st.ctimeMs) >= since || Number(st.mtimeMs) >= since;

const buffer = Buffer.allocUnsafe(CHUNK);

/** sha256 of a regular file, opened without following a symlink swapped in after the stat; `undefined` when it is gone or no longer a file. */
async function hashFile(path: string): Promise<string | undefined> {
  let fd: number;
  try {
    fd = openSync(path, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const hash = createHash('sha256');
    for (;;) {
      const n = readSync(fd, buffer, 0, CHUNK, null);
      if (n === 0) break;
      hash.update(buffer.subarray(0, n));
      await breathe();
    }
    return hash.digest('hex');
  } finally {
    closeSync(fd);
  }
}

/** Upper-layer paths (workspace-relative, `./`-prefixed) with a ctime or mtime at or after `since` (host ms). */
export async function changedInUpper(upperWs: string, since: number): Promise<string[]> {
  const out: string[] = [];
  const top = lstatOrNone(upperWs);
  // Nothing under the workspace was written since the container was made.
  if (!top?.isDirectory()) return out;
  if (isRacy(top, since)) out.push('.');
  const stack = ['.'];
  while (stack.length) {
    const dir = stack.pop()!;
    let entries: Dirent[];
    try {
      entries = readdirSync(upperWs + dir.slice(1), { withFileTypes: true });
    } catch {
      // Removed while walked: a change (a writer runs), for the merged view to tell.
      out.push(dir);
      continue;
    }
    for (const e of entries) {
      const p = `${dir}/${e.name}`;
      await breathe();
      const st = lstatOrNone(upperWs + p.slice(1));
      if (!st || isRacy(st, since)) out.push(p);
      if (st && e.isDirectory()) stack.push(p);
    }
  }
  return out;
}

/**
 * The workspace manifest from the container's overlay layer, read on this machine, with no exec:
 * the upper directory names every path written since the container was made (a rewrite copies the
 * file up, a deletion leaves a whiteout, both with a new ctime, which user space cannot set back);
 * those with a ctime or mtime at or after `prev.since` (less the clock margin) are looked at in the
 * merged view and only their regular files hashed; a changed directory's children are listed
 * there, which catches a removal that left no whiteout and a directory made opaque. The rest keep
 * `prev.manifest`'s values. Sound for the same reason as the in-container stat cache, and trusted
 * the same way: `prev` must come from this process's own scan of the same live container.
 * Without `prev` every file is hashed. Host root reads every file, so nothing is unreadable.
 */
export async function scanLayer(dirs: LayerDirs, ws: string, prev: { manifest: WorkspaceManifest; since: number } | null): Promise<LayerListing> {
  const startedAt = Date.now();
  const base = dirs.merged + ws.replace(/\/+$/, '');
  const manifest: WorkspaceManifest = prev ? { ...prev.manifest } : {};
  const keys = new Map<string, string>();
  const children = new Map<string, string[]>();
  const toHash = new Map<string, string>();
  // Parent → child paths of the manifest, built on the first removal.
  let index: Map<string, Set<string>> | undefined;
  const indexOf = () => {
    if (!index) {
      index = new Map();
      for (const p of Object.keys(manifest)) {
        const parent = parentOf(p);
        if (!index.has(parent)) index.set(parent, new Set());
        index.get(parent)!.add(p);
      }
    }
    return index;
  };
  const setEntry = (p: string, v: string) => {
    if (!(p in manifest)) indexOf().get(parentOf(p))?.add(p) ?? indexOf().set(parentOf(p), new Set([p]));
    manifest[p] = v;
  };
  const removeBelow = (p: string) => {
    for (const c of indexOf().get(p) ?? []) remove(c);
    indexOf().delete(p);
  };
  const remove = (p: string) => {
    const dir = manifest[p]?.startsWith('d:');
    removeBelow(p);
    delete manifest[p];
    indexOf().get(parentOf(p))?.delete(p);
    toHash.delete(p);
    // New files queued below a removed directory are not in the index yet (only in a race).
    if (dir) for (const q of toHash.keys()) if (q.startsWith(`${p}/`)) toHash.delete(q);
  };
  const seen = new Set<string>();
  // A path that vanished or changed type between two calls: the result cannot stand (a writer is running).
  let complete = true;
  /** Brings `p` up to date from the merged view; `whole`: its subtree is new, look at all of it. */
  const refresh = async (p: string, whole: boolean): Promise<void> => {
    if (seen.has(p)) return;
    seen.add(p);
    await breathe();
    const st = lstatOrNone(base + p.slice(1));
    if (!st) {
      if (p === '.') complete = false;
      else remove(p);
      return;
    }
    keys.set(p, keyOf(st));
    if (st.isDirectory()) {
      const wasDir = p === '.' || manifest[p]?.startsWith('d:');
      if (p !== '.') {
        if (!wasDir) removeBelow(p);
        setEntry(p, `d:${modeOf(st)}`);
      }
      let names: string[];
      try {
        names = readdirSync(base + p.slice(1)).sort();
      } catch {
        complete = false;
        return;
      }
      children.set(p, names);
      const here = new Set(names.map((n) => `${p}/${n}`));
      for (const old of [...(indexOf().get(p) ?? [])]) if (!here.has(old)) remove(old);
      for (const c of here) if (whole || !wasDir || !(c in manifest)) await refresh(c, whole || !wasDir || !(c in manifest));
      return;
    }
    removeBelow(p);
    if (st.isFile()) toHash.set(p, modeOf(st));
    else if (st.isSymbolicLink()) {
      try {
        setEntry(p, `l:${readlinkSync(base + p.slice(1))}`);
      } catch {
        complete = false;
      }
    }
    else setEntry(p, `o:${modeOf(st)}`);
  };
  if (!prev) await refresh('.', true);
  else for (const p of await changedInUpper(dirs.upper + ws.replace(/\/+$/, ''), prev.since - LAYER_CLOCK_MARGIN_MS)) await refresh(p, false);
  for (const [p, mode] of toHash) {
    const hash = await hashFile(base + p.slice(1));
    // Gone or swapped since the stat: a value that never verifies; the after-commit check sees the change.
    if (!hash) complete = false;
    setEntry(p, hash ? `f:${mode}:${hash}` : `f:${mode}:unreadable:${startedAt}`);
  }
  return { manifest, keys, children, hashed: toHash.size, complete, startedAt };
}

/**
 * The first path whose state moved since `first` read it (`null`: none), from a second walk of the upper directory:
 * every path with a time at or after `first.startedAt` (less the margin) must be one `first`
 * looked at, with the same stat fields, the same children for a directory and, since a rewrite in
 * the same clock tick keeps size and times, the same hash for a file. A path means a writer ran
 * during the snapshot.
 */
export async function layerChangedPath(dirs: LayerDirs, ws: string, first: LayerListing): Promise<string | null> {
  const base = dirs.merged + ws.replace(/\/+$/, '');
  for (const p of await changedInUpper(dirs.upper + ws.replace(/\/+$/, ''), first.startedAt - LAYER_CLOCK_MARGIN_MS)) {
    await breathe();
    const st = lstatOrNone(base + p.slice(1));
    if (!st) {
      if (p in first.manifest || first.keys.has(p)) return p;
      continue;
    }
    if (first.keys.get(p) !== keyOf(st)) return p;
    if (st.isDirectory()) {
      let names: string;
      try {
        names = readdirSync(base + p.slice(1)).sort().join('/');
      } catch {
        return p;
      }
      if (names !== (first.children.get(p) ?? []).join('/')) return p;
    } else if (st.isFile()) {
      const hash = await hashFile(base + p.slice(1));
      if (!hash || first.manifest[p] !== `f:${modeOf(st)}:${hash}`) return p;
    }
  }
  return null;
}
