import type { BigIntStats } from 'node:fs';
import type { WorkspaceManifest } from './manifest';
import { ConfinedTree, hashConfined, nameString, ReadBudget } from './confined';

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
// a big layer does not stall the host's other work, and check the budget (a cancel, the bounds) there.
const YIELD_EVERY = 500;
let calls = 0;
const breathe = async (budget: ReadBudget) => {
  budget.entry();
  if (++calls % YIELD_EVERY === 0) {
    await new Promise<void>((r) => setImmediate(r));
    budget.check();
  }
};

/**
 * The workspace root in the merged view, or `undefined` when it is not a plain directory there
 * (a symlinked workspace resolves against the host's root, not the container's: the caller lists
 * it inside the container instead). Every component is opened as a directory, never followed.
 */
export async function layerWorkspace(dirs: LayerDirs, ws: string): Promise<boolean> {
  // A stopped container's merged directory is unmounted (empty): the workspace is then missing.
  const tree = ConfinedTree.at(dirs.merged, ws);
  tree?.close();
  return tree !== undefined;
}

const keyOf = (st: BigIntStats) => `${st.mode}|${st.size}|${st.mtimeNs}|${st.ctimeNs}|${st.ino}`;
const modeOf = (st: BigIntStats) => (Number(st.mode) & 0o7777).toString(8);
const parentOf = (p: string) => (p === '.' ? '' : p.slice(0, p.lastIndexOf('/')));
const isRacy = (st: BigIntStats, since: number) => Number(st.ctimeMs) >= since || Number(st.mtimeMs) >= since;

/** The tree of `root` + `ws`, closed after `fn`, or `fn(undefined)` when the workspace is not a directory there. */
export async function withTree<T>(root: string, ws: string, fn: (tree: ConfinedTree | undefined) => Promise<T>): Promise<T> {
  const tree = ConfinedTree.at(root, ws.replace(/\/+$/, ''));
  try {
    return await fn(tree);
  } finally {
    tree?.close();
  }
}

/**
 * Upper-layer paths (workspace-relative, `./`-prefixed) with a ctime or mtime at or after `since`
 * (host ms). A depth-first walk by directory descriptors: one open descriptor per level.
 */
export async function changedInUpper(dirs: LayerDirs, ws: string, since: number, budget: ReadBudget = new ReadBudget()): Promise<string[]> {
  return withTree(dirs.upper, ws, async (tree) => {
    const out: string[] = [];
    // Nothing under the workspace was written since the container was made.
    if (!tree) return out;
    const top = tree.lstat('.');
    if (top && isRacy(top, since)) out.push('.');
    const stack = ['.'];
    while (stack.length) {
      const dir = stack.pop()!;
      budget.depth(dir.split('/').length, dir);
      const names = tree.children(dir);
      // Removed or swapped while walked: a change (a writer runs), for the merged view to tell.
      if (!names) {
        out.push(dir);
        continue;
      }
      for (const n of names) {
        const p = `${dir}/${nameString(n)}`;
        await breathe(budget);
        const st = tree.lstat(p);
        if (!st || isRacy(st, since)) out.push(p);
        if (st?.isDirectory()) stack.push(p);
      }
    }
    return out;
  });
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
export async function scanLayer(dirs: LayerDirs, ws: string, prev: { manifest: WorkspaceManifest; since: number } | null, budget: ReadBudget = new ReadBudget()): Promise<LayerListing> {
  const startedAt = Date.now();
  const changed = prev ? await changedInUpper(dirs, ws, prev.since - LAYER_CLOCK_MARGIN_MS, budget) : null;
  const wsPath = ws.replace(/\/+$/, '');
  return withTree(dirs.merged, ws, async (tree) => {
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
    let complete = !!tree;
    // Paths to bring up to date from the merged view; `whole`: its subtree is new, look at all of it.
    // A stack, not recursion: a tree 5,000 directories deep is walked in constant native stack.
    const work: Array<[string, boolean]> = [];
    const refresh = async (p: string, whole: boolean): Promise<void> => {
      if (seen.has(p)) return;
      seen.add(p);
      await breathe(budget);
      const st = tree!.lstat(p);
      if (!st) {
        if (p === '.') complete = false;
        else remove(p);
        return;
      }
      keys.set(p, keyOf(st));
      budget.pathLength(wsPath + p.slice(1), p);
      if (st.isDirectory()) {
        budget.depth(p.split('/').length, p);
        const wasDir = p === '.' || manifest[p]?.startsWith('d:');
        if (p !== '.') {
          if (!wasDir) removeBelow(p);
          setEntry(p, `d:${modeOf(st)}`);
        }
        const raw = tree!.children(p);
        if (!raw) {
          complete = false;
          return;
        }
        const names = raw.map(nameString);
        children.set(p, names);
        const here = new Set(names.map((n) => `${p}/${n}`));
        for (const old of [...(indexOf().get(p) ?? [])]) if (!here.has(old)) remove(old);
        const next: Array<[string, boolean]> = [];
        for (const c of here) if (whole || !wasDir || !(c in manifest)) next.push([c, true]);
        for (let i = next.length - 1; i >= 0; i--) work.push(next[i]!);
        return;
      }
      removeBelow(p);
      if (st.isFile()) toHash.set(p, modeOf(st));
      else if (st.isSymbolicLink()) {
        const target = tree!.readlink(p);
        if (target) setEntry(p, `l:${nameString(target)}`);
        else complete = false;
      } else setEntry(p, `o:${modeOf(st)}`);
    };
    if (tree) {
      if (!changed) work.push(['.', true]);
      else for (let i = changed.length - 1; i >= 0; i--) work.push([changed[i]!, false]);
      while (work.length) {
        const [p, whole] = work.pop()!;
        await refresh(p, whole);
      }
    }
    for (const [p, mode] of toHash) {
      const h = await hashConfined(tree!, p, budget);
      // Gone or swapped since the stat: a value that never verifies; the after-commit check sees the change.
      if (!h) complete = false;
      setEntry(p, h ? `f:${mode}:${h.hash}` : `f:${mode}:unreadable:${startedAt}`);
    }
    return { manifest, keys, children, hashed: toHash.size, complete, startedAt };
  });
}

/**
 * The first path whose state moved since `first` read it (`null`: none), from a second walk of the upper directory:
 * every path with a time at or after `first.startedAt` (less the margin) must be one `first`
 * looked at, with the same stat fields, the same children for a directory and, since a rewrite in
 * the same clock tick keeps size and times, the same hash for a file. A path means a writer ran
 * during the snapshot.
 */
export async function layerChangedPath(dirs: LayerDirs, ws: string, first: LayerListing, budget: ReadBudget = new ReadBudget()): Promise<string | null> {
  const changed = await changedInUpper(dirs, ws, first.startedAt - LAYER_CLOCK_MARGIN_MS, budget);
  return withTree(dirs.merged, ws, async (tree) => {
    if (!tree) return '.';
    for (const p of changed) {
      await breathe(budget);
      const st = tree.lstat(p);
      if (!st) {
        if (p in first.manifest || first.keys.has(p)) return p;
        continue;
      }
      if (first.keys.get(p) !== keyOf(st)) return p;
      if (st.isDirectory()) {
        const names = tree.children(p);
        if (!names) return p;
        if (names.map(nameString).join('/') !== (first.children.get(p) ?? []).join('/')) return p;
      } else if (st.isFile()) {
        const h = await hashConfined(tree, p, budget);
        if (!h || first.manifest[p] !== `f:${modeOf(st)}:${h.hash}`) return p;
      }
    }
    return null;
  });
}
