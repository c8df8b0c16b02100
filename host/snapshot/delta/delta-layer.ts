import { createHash } from 'node:crypto';
import { closeSync, constants as fsc, fstatSync, lstatSync, openSync, readSync, type Stats } from 'node:fs';
import { changedInUpper, LAYER_CLOCK_MARGIN_MS, type LayerDirs } from '../layer-scan';
import type { WorkspaceManifest } from '../manifest';
import { packEntries, readsBack, type TarEntry, type TarHeader as Headers } from './delta-tar';

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
}

const parentOf = (p: string) => (p === '.' ? '' : p.slice(0, p.lastIndexOf('/')));
const CHUNK = 1 << 20;
const buffer = Buffer.allocUnsafe(CHUNK);

/** The file's bytes and their sha256, read without following a symlink swapped in; `undefined` when it is no longer a single-linked regular file. */
function readFile(path: string): { data: Buffer; hash: string; st: Stats } | { refused: string } {
  let fd: number;
  try {
    fd = openSync(path, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch {
    return { refused: 'a file vanished while it was read' };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { refused: 'a file changed type while it was read' };
    // A hard link would become two files in a layer written path by path: the engine's commit keeps it.
    if (st.nlink > 1) return { refused: 'a changed file has hard links' };
    const parts: Buffer[] = [];
    const hash = createHash('sha256');
    for (;;) {
      const n = readSync(fd, buffer, 0, CHUNK, null);
      if (n === 0) break;
      const chunk = Buffer.from(buffer.subarray(0, n));
      hash.update(chunk);
      parts.push(chunk);
    }
    return { data: Buffer.concat(parts), hash: hash.digest('hex'), st };
  } finally {
    closeSync(fd);
  }
}

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
function unwritable(path: string, st: Stats): string | undefined {
  const t = Math.floor(st.mtimeMs / 1000);
  if (t < 0 || t > MAX_TIME_S) return `${path} has a modification time a tar header cannot hold`;
  if (st.uid > MAX_ID || st.gid > MAX_ID) return `${path} has an owner id a tar header cannot hold`;
  return undefined;
}

const header = (name: string, st: Stats): Headers => ({
  name,
  mode: st.mode & 0o7777,
  uid: st.uid,
  gid: st.gid,
  // Whole seconds, as the engine's own commits write them.
  mtime: new Date(Math.floor(st.mtimeMs / 1000) * 1000),
});

/**
 * The layer that takes the base image (whose workspace is `base`) to the container's workspace
 * now (`now`, a complete layer scan), built on this machine from the container's overlay
 * directories. Every workspace path the container wrote since `since` (host ms; the time the base
 * image's state was read) or whose value differs from `base` goes in with its current content,
 * mode, owner and time; every path of
 * `base` that is gone gets a whiteout in its surviving parent; every directory above them is
 * written with its current metadata (an unwritten parent would be made with the engine's default
 * mode). Nothing outside the workspace is looked at: the caller checks that nothing changed there.
 *
 * Refused, for the caller to commit instead: a special file or a hard link among the changes, a
 * time before 1970 or after 2038 or an owner id over 262143 (what the tar writer holds), a
 * file whose bytes no longer match `now` (a writer is running), or a layer of more than `maxBytes`.
 */
export async function buildDeltaLayer(o: { dirs: LayerDirs; ws: string; base: WorkspaceManifest; now: WorkspaceManifest; since: number; maxBytes: number }): Promise<DeltaLayer | DeltaRefusal> {
  const ws = o.ws.replace(/\/+$/, '');
  const merged = (p: string) => o.dirs.merged + ws + p.slice(1);
  const name = (p: string) => (ws + p.slice(1)).replace(/^\/+/, '');
  // Written since, or different from the base at all: a directory renamed within the layer keeps
  // its children's times, so they are new paths without being recent ones.
  const racy = (await changedInUpper(o.dirs.upper + ws, o.since - LAYER_CLOCK_MARGIN_MS)).filter((p) => p === '.' || p in o.now);
  const written = [...new Set([...racy, ...Object.keys(o.now).filter((p) => o.now[p] !== o.base[p])])];
  const whiteouts = Object.keys(o.base).filter((p) => !(p in o.now) && (parentOf(p) === '.' || o.now[parentOf(p)]?.startsWith('d:')));
  // Directories above every entry, from the filesystem root down.
  const dirs = new Set<string>();
  const addParents = (containerPath: string) => {
    for (let at = containerPath.lastIndexOf('/'); at > 0; at = containerPath.lastIndexOf('/', at - 1)) dirs.add(containerPath.slice(0, at));
  };
  for (const p of [...written, ...whiteouts]) addParents(ws + p.slice(1));
  dirs.add(ws);
  const entries: TarEntry[] = [];
  for (const d of dirs) {
    const st = lstatSync(o.dirs.merged + d, { throwIfNoEntry: false });
    if (!st?.isDirectory()) return { refused: `${d} is no longer a directory` };
    const bad = unwritable(d, st);
    if (bad) return { refused: bad };
    entries.push({ name: d.replace(/^\/+/, ''), header: { ...header(d.replace(/^\/+/, ''), st), type: 'directory' } });
  }
  let bytes = 0;
  for (const p of written) {
    if (p === '.') continue;
    const value = o.now[p]!;
    if (value.startsWith('o:')) return { refused: `${p} is a special file` };
    // In a layer, a file named .wh.X is the removal of X: a workspace file so named is the engine's to commit.
    if (p.slice(p.lastIndexOf('/') + 1).startsWith('.wh.')) return { refused: `${p} has a name a layer reads as a removal` };
    const st = lstatSync(merged(p), { throwIfNoEntry: false });
    if (!st) return { refused: `${p} vanished while the layer was built` };
    const bad = unwritable(p, st);
    if (bad) return { refused: bad };
    if (value.startsWith('d:')) {
      if (!st.isDirectory()) return { refused: `${p} changed type while the layer was built` };
      if (!dirs.has(ws + p.slice(1))) entries.push({ name: name(p), header: { ...header(name(p), st), type: 'directory' } });
    } else if (value.startsWith('l:')) {
      if (!st.isSymbolicLink()) return { refused: `${p} changed type while the layer was built` };
      entries.push({ name: name(p), header: { ...header(name(p), st), type: 'symlink', linkname: value.slice(2) } });
    } else {
      // Counted as the tar holds it (a header and whole blocks), so many tiny files count too.
      if ((bytes += 512 + Math.ceil(st.size / 512) * 512) + 512 * entries.length > o.maxBytes) return { refused: `more than ${o.maxBytes} bytes changed` };
      const f = readFile(merged(p));
      if ('refused' in f) return f;
      // The scan hashed these bytes; other bytes now mean a writer is still running.
      if (value !== `f:${(f.st.mode & 0o7777).toString(8)}:${f.hash}`) return { refused: `${p} changed while the layer was built` };
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
  return { tar: out, diffId: `sha256:${createHash('sha256').update(out).digest('hex')}`, bytes, entries: entries.length - whiteouts.length, whiteouts: whiteouts.length };
}
