import { createHash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { changedInUpper, LAYER_CLOCK_MARGIN_MS, withTree, type LayerDirs } from '../layer-scan';
import { hasEscapedBytes, readConfined, ReadBudget, type ConfinedTree } from '../confined';
import type { WorkspaceManifest } from '../manifest';
import { packEntries, readsBack, type TarEntry, type TarHeader as Headers } from './delta-tar';
import type { OutsideDir } from './outside-dirs';

/** A layer tar that turns the base image's view of the workspace into the container's current one. */
export interface DeltaLayer {
  tar: Buffer;
  /** `sha256:` of the uncompressed tar: the diff id the image config names. */
  diffId: string;
  /** Bytes of file content in it, in whole tar blocks with their headers. */
  bytes: number;
  /** Entries written (directories, files, links) and whiteouts (removals). */
  entries: number;
  whiteouts: number;
}

/** Why a delta cannot stand for the change: the caller commits the container instead. */
export interface DeltaRefusal {
  refused: string;
  /** The workspace moved while the layer was built: a writer is running, so a frozen take is the way. */
  writer?: true;
}

const parentOf = (p: string) => (p === '.' ? '' : p.slice(0, p.lastIndexOf('/')));

/** Path components compared one by one, so that a directory comes before everything in it. */
function byComponents(a: string, b: string): number {
  const x = a.split('/');
  const y = b.split('/');
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  return x.length - y.length;
}

/**
 * What tar-stream writes right: it passes the time through a 32-bit integer (a file dated after
 * January 2038 got a negative field, which the engine refused as an invalid tar header) and writes
 * owner ids in 6 octal digits (a larger id would silently become 262143).
 */
const MAX_TIME_S = 2 ** 31 - 1;
const MAX_ID = 0o777777;

/** Why `st` cannot be written in a plain tar header (the engine refuses a header a pax record would need here). */
function unwritable(path: string, st: BigIntStats): string | undefined {
  const t = Math.floor(Number(st.mtimeMs) / 1000);
  if (t < 0 || t > MAX_TIME_S) return `${path} has a modification time a tar header cannot hold`;
  if (st.uid > MAX_ID || st.gid > MAX_ID) return `${path} has an owner id a tar header cannot hold`;
  return undefined;
}

const header = (name: string, st: BigIntStats): Headers => ({
  name,
  mode: Number(st.mode) & 0o7777,
  uid: Number(st.uid),
  gid: Number(st.gid),
  // Whole seconds, as the engine's own commits write them.
  mtime: new Date(Math.floor(Number(st.mtimeMs) / 1000) * 1000),
});

/**
 * What an entry costs in the tar before its content: a 512-byte header, and a pax header (two
 * blocks and its record) for a name or link target a plain header cannot hold.
 */
const headerBytes = (name: string, link = '') => 512 + (Buffer.byteLength(name) > 100 || Buffer.byteLength(link) > 100 ? 1024 + Math.ceil((Buffer.byteLength(name) + Buffer.byteLength(link)) / 512) * 512 : 0);

/**
 * The layer that takes the base image (whose workspace is `base`) to the container's workspace
 * now (`now`, a complete layer scan), built on this machine from the container's overlay
 * directories. Every workspace path the container wrote since `since` (host ms; the time the base
 * image's state was read) or whose value differs from `base` goes in with its current content,
 * mode, owner and time; every path of
 * `base` that is gone gets a whiteout in its surviving parent; every directory above them is
 * written with its current metadata (an unwritten parent would be made with the engine's default
 * mode). Outside the workspace only `outside` is written (empty directories, each opaque: see
 * outside-dirs.ts); the caller checks that nothing else changed there.
 *
 * Refused, for the caller to commit instead: a special file or a hard link among the changes, a
 * time before 1970 or after 2038 or an owner id over 262143 (what the tar writer holds), a
 * file whose bytes no longer match `now` (a writer is running), or a layer of more than `maxBytes`.
 */
export async function buildDeltaLayer(o: { dirs: LayerDirs; ws: string; base: WorkspaceManifest; now: WorkspaceManifest; since: number; maxBytes: number; budget?: ReadBudget; outside?: readonly OutsideDir[] }): Promise<DeltaLayer | DeltaRefusal> {
  const ws = o.ws.replace(/\/+$/, '');
  const budget = o.budget ?? new ReadBudget();
  const name = (p: string) => (ws + p.slice(1)).replace(/^\/+/, '');
  // Written since, or different from the base at all: a directory renamed within the layer keeps
  // its children's times, so they are new paths without being recent ones.
  const racy = (await changedInUpper(o.dirs, ws, o.since - LAYER_CLOCK_MARGIN_MS, budget)).filter((p) => p === '.' || p in o.now);
  const written = [...new Set([...racy, ...Object.keys(o.now).filter((p) => o.now[p] !== o.base[p])])];
  const whiteouts = Object.keys(o.base).filter((p) => !(p in o.now) && (parentOf(p) === '.' || o.now[parentOf(p)]?.startsWith('d:')));
  // The workspace's own ancestors, from the filesystem root down (above the workspace: the image's).
  const above: string[] = [];
  for (let at = ws.indexOf('/', 1); at > 0; at = ws.indexOf('/', at + 1)) above.push(ws.slice(0, at));
  // Directories above every entry inside the workspace, as workspace paths.
  const dirs = new Set<string>(['.']);
  for (const p of [...written, ...whiteouts]) for (let q = parentOf(p); q !== '' && !dirs.has(q); q = parentOf(q)) dirs.add(q);
  // Every entry of every kind costs at least its header: counted before anything is read, so a
  // hundred thousand empty directories or links are refused without building anything.
  let bytes = 1024;
  for (const d of [...above, ...dirs]) bytes += headerBytes(d === '.' ? ws : name(d));
  for (const p of written) {
    const v = o.now[p] ?? '';
    bytes += headerBytes(name(p), v.startsWith('l:') ? v.slice(2) : '');
  }
  for (const p of whiteouts) bytes += headerBytes(name(p)) + 4;
  const outside = o.outside ?? [];
  for (const d of outside) bytes += 2 * headerBytes(`${d.name}/.wh..wh..opq`);
  if (bytes > o.maxBytes) return { refused: `more than ${o.maxBytes} bytes changed (${written.length + whiteouts.length} entries)` };
  for (const p of [...written, ...whiteouts]) if (hasEscapedBytes(p) || hasEscapedBytes(o.now[p] ?? '')) return { refused: `${p} has a name or link target that is not UTF-8 (the engine's commit keeps its bytes)` };
  return withTree(o.dirs.merged, ws, async (tree) => (tree ? build(tree) : { refused: 'the workspace is no longer a directory', writer: true }));

  async function build(tree: ConfinedTree): Promise<DeltaLayer | DeltaRefusal> {
    const entries: TarEntry[] = [];
    // Above the workspace: the image's directories, which the sandbox may have swapped too: opened confined as well.
    const rootTree = await withTree(o.dirs.merged, '', async (root) => {
      for (const d of above) {
        const st = root?.lstat(`.${d}`);
        if (!st?.isDirectory()) return `${d} is no longer a directory`;
        const bad = unwritable(d, st);
        if (bad) return bad;
        entries.push({ name: d.slice(1), header: { ...header(d.slice(1), st), type: 'directory' } });
      }
      return undefined;
    });
    if (rootTree) return { refused: rootTree };
    for (const d of outside) {
      const bad = unwritable(`/${d.name}`, d.st);
      if (bad) return { refused: bad };
      entries.push({ name: d.name, header: { ...header(d.name, d.st), type: 'directory' } });
      // Opaque: empty in the image too, whatever the layers below hold there.
      const opq = `${d.name}/.wh..wh..opq`;
      entries.push({ name: opq, header: { name: opq, type: 'file', mode: 0o600, uid: 0, gid: 0, size: 0, mtime: new Date(0) }, data: Buffer.alloc(0) });
    }
    for (const d of dirs) {
      const st = tree.lstat(d);
      if (!st?.isDirectory()) return { refused: `${d} is no longer a directory`, writer: true };
      const bad = unwritable(d, st);
      if (bad) return { refused: bad };
      const n = d === '.' ? ws.replace(/^\/+/, '') : name(d);
      entries.push({ name: n, header: { ...header(n, st), type: 'directory' } });
    }
    for (const p of written) {
      if (p === '.') continue;
      budget.entry();
      const value = o.now[p]!;
      if (value.startsWith('o:')) return { refused: `${p} is a special file` };
      // In a layer, a file named .wh.X is the removal of X: a workspace file so named is the engine's to commit.
      if (p.slice(p.lastIndexOf('/') + 1).startsWith('.wh.')) return { refused: `${p} has a name a layer reads as a removal` };
      const st = tree.lstat(p);
      if (!st) return { refused: `${p} vanished while the layer was built`, writer: true };
      const bad = unwritable(p, st);
      if (bad) return { refused: bad };
      if (value.startsWith('d:')) {
        if (!st.isDirectory()) return { refused: `${p} changed type while the layer was built`, writer: true };
        if (!dirs.has(p)) entries.push({ name: name(p), header: { ...header(name(p), st), type: 'directory' } });
      } else if (value.startsWith('l:')) {
        if (!st.isSymbolicLink()) return { refused: `${p} changed type while the layer was built`, writer: true };
        entries.push({ name: name(p), header: { ...header(name(p), st), type: 'symlink', linkname: value.slice(2) } });
      } else {
        // Counted as the tar holds it (whole blocks), with every header counted above.
        if ((bytes += Math.ceil(Number(st.size) / 512) * 512) > o.maxBytes) return { refused: `more than ${o.maxBytes} bytes changed` };
        const f = readConfined(tree, p, budget);
        if (!f) return { refused: `${p} is no longer a regular file`, writer: true };
        // A hard link would become two files in a layer written path by path: the engine's commit keeps it.
        if (f.st.nlink > 1n) return { refused: 'a changed file has hard links' };
        // The scan hashed these bytes; other bytes now mean a writer is still running.
        if (value !== `f:${(Number(f.st.mode) & 0o7777).toString(8)}:${f.hash}`) return { refused: `${p} changed while the layer was built`, writer: true };
        entries.push({ name: name(p), header: { ...header(name(p), f.st), type: 'file', size: f.data.length }, data: f.data });
      }
    }
    for (const p of whiteouts) {
      const wh = `${name(parentOf(p))}/.wh.${p.slice(p.lastIndexOf('/') + 1)}`.replace(/^\/+/, '');
      entries.push({ name: wh, header: { name: wh, type: 'file', mode: 0o600, uid: 0, gid: 0, size: 0, mtime: new Date(0) }, data: Buffer.alloc(0) });
    }
    entries.sort((a, b) => byComponents(a.name, b.name));
    const out = await packEntries(entries);
    const lost = await readsBack(out, entries);
    if (lost) return { refused: lost };
    return { tar: out, diffId: `sha256:${createHash('sha256').update(out).digest('hex')}`, bytes, entries: entries.length - whiteouts.length - outside.length, whiteouts: whiteouts.length + outside.length };
  }
}
