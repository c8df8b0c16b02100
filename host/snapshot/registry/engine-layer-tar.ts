import { closeSync, readFileSync, readSync } from 'node:fs';
import { closeDir, lstatAt, openConfinedRoot, openDirAt, openFileAt, readdirAt, readlinkAt, type ConfinedDir } from '../confined';

/**
 * The tar the engine writes when it commits a container whose upper directory is `upperDir`
 * (overlay2, native diff: the directory walked in byte order, each entry by the engine's archive
 * package and Go's tar writer in PAX mode, whiteouts as `.wh.` files), written here from the same
 * directory, so that its upload can start while the engine is still committing. Only the cases
 * that come out as plain USTAR headers are written; anything else (a FIFO or device,
 * a name or link of 100 bytes or more or not ASCII, an id or size past the octal fields) stops the
 * stream with {@link NotPredictable}. What cannot be seen from here (an opaque directory's
 * `trusted.overlay.opaque`, a file capability) makes a different tar: the caller only ever uses
 * these bytes when their sha256 equals the diff id the engine reports, so a wrong guess costs the
 * upload, never the layer.
 */
export class NotPredictable extends Error {}

const BLOCK = 512;

function field(b: Buffer, off: number, len: number, s: string | Buffer): void {
  const v = typeof s === 'string' ? Buffer.from(s, 'latin1') : s;
  if (v.length > len) throw new NotPredictable('field too long');
  v.copy(b, off);
}

function octal(b: Buffer, off: number, len: number, x: number): void {
  if (x < 0 || x >= 8 ** (len - 1)) throw new NotPredictable('number too big for its field');
  field(b, off, len, x.toString(8).padStart(len - 1, '0'));
}

const ascii = (b: Buffer) => b.every((c) => c > 0 && c < 0x80);

/** User and group names by id, as the engine's lookup finds them in this machine's files (first match). */
function names(file: string): Map<number, string> {
  const m = new Map<number, string>();
  try {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const [name, , id] = line.split(':');
      const n = Number(id);
      if (name && id !== undefined && id !== '' && Number.isInteger(n) && !m.has(n)) m.set(n, name);
    }
  } catch {
    // No file: no names, as the engine's lookup would find none.
  }
  return m;
}

interface Head {
  name: Buffer;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  type: string;
  link?: Buffer;
}

function header(h: Head, users: Map<number, string>, groups: Map<number, string>): Buffer {
  if (h.name.length >= 100 || !ascii(h.name) || (h.link && (h.link.length >= 100 || !ascii(h.link)))) throw new NotPredictable('name needs a PAX record');
  const uname = users.get(h.uid) ?? '';
  const gname = groups.get(h.gid) ?? '';
  if (uname.length > 32 || gname.length > 32 || !/^[\x01-\x7f]*$/.test(uname + gname)) throw new NotPredictable('owner name needs a PAX record');
  const b = Buffer.alloc(BLOCK);
  field(b, 0, 100, h.name);
  octal(b, 100, 8, h.mode);
  octal(b, 108, 8, h.uid);
  octal(b, 116, 8, h.gid);
  octal(b, 124, 12, h.size);
  octal(b, 136, 12, h.mtime);
  b.fill(0x20, 148, 156);
  field(b, 156, 1, h.type);
  if (h.link) field(b, 157, 100, h.link);
  field(b, 257, 8, 'ustar\u000000');
  field(b, 265, 32, uname);
  field(b, 297, 32, gname);
  octal(b, 329, 8, 0);
  octal(b, 337, 8, 0);
  let sum = 0;
  for (const c of b) sum += c;
  field(b, 148, 7, sum.toString(8).padStart(6, '0'));
  b[154] = 0;
  b[155] = 0x20;
  return b;
}

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

/**
 * Yields the layer tar of `upperDir` as it reads it (each file in pieces of at most 1 MiB), within
 * `maxBytes` of file content. Reads through descriptors, as every host-side reading of a sandbox's
 * files does (`confined/`): no component can leave the directory, only regular files are opened.
 */
export async function* engineLayerTar(upperDir: string, o: { maxBytes: number; signal?: AbortSignal }): AsyncGenerator<Buffer> {
  const root = openConfinedRoot(upperDir);
  if (!root) throw new NotPredictable('no upper directory');
  const users = names('/etc/passwd');
  const groups = names('/etc/group');
  let total = 0;
  let entries = 0;
  // The engine's hard-link table: an inode's later names become links to its first (overlay shares
  // one whiteout inode between whiteouts, so these are common), by the name before the `.wh.` rename.
  const seen = new Map<bigint, Buffer>();
  const linkOf = (st: { ino: bigint; nlink: bigint }, path: Buffer): Buffer | undefined => {
    if (st.nlink <= 1n) return undefined;
    const first = seen.get(st.ino);
    if (!first) seen.set(st.ino, path);
    return first;
  };
  async function* walk(dir: ConfinedDir, prefix: Buffer, depth: number): AsyncGenerator<Buffer> {
    if (depth > 256) throw new NotPredictable('too deep');
    for (const name of readdirAt(dir)) {
      if (++entries % 200 === 0) {
        o.signal?.throwIfAborted();
        await new Promise((r) => setImmediate(r));
      }
      const st = lstatAt(dir, name);
      if (!st) throw new NotPredictable('an entry went away');
      const path = Buffer.concat([prefix, name]);
      const mode = Number(st.mode);
      const common = { mode, uid: Number(st.uid), gid: Number(st.gid), mtime: Number(st.mtimeMs / 1000n) };
      const kind = mode & S_IFMT;
      if (kind === S_IFDIR) {
        yield header({ ...common, name: Buffer.concat([path, Buffer.from('/')]), size: 0, type: '5' }, users, groups);
        const child = openDirAt(dir, name);
        if (!child) throw new NotPredictable('a directory went away');
        try {
          yield* walk(child, Buffer.concat([path, Buffer.from('/')]), depth + 1);
        } finally {
          closeDir(child);
        }
      } else if (kind === S_IFLNK) {
        const link = readlinkAt(dir, name);
        if (!link) throw new NotPredictable('a link went away');
        yield header({ ...common, name: path, size: 0, type: '2', link }, users, groups);
      } else if (kind === S_IFCHR && st.rdev === 0n) {
        // An overlay whiteout: the engine writes it as an empty `.wh.` file, mode 0600 (a shared
        // whiteout inode's later names keep the link name the engine set before renaming it).
        const link = linkOf(st, path);
        yield header({ ...common, mode: 0o600, name: Buffer.concat([prefix, Buffer.from('.wh.'), name]), size: 0, type: '0', ...(link ? { link } : {}) }, users, groups);
      } else if (kind === S_IFREG) {
        const link = linkOf(st, path);
        if (link) {
          yield header({ ...common, name: path, size: 0, type: '1', link }, users, groups);
          continue;
        }
        const size = Number(st.size);
        if ((total += size) > o.maxBytes) throw new NotPredictable('over the bound');
        const f = openFileAt(dir, name);
        if (!f || Number(f.st.size) !== size) throw new NotPredictable('a file changed');
        try {
          yield header({ ...common, name: path, size, type: '0' }, users, groups);
          for (let off = 0; off < size; ) {
            const b = Buffer.allocUnsafe(Math.min(size - off, 1 << 20));
            let got = 0;
            while (got < b.length) {
              const n = readSync(f.fd, b, got, b.length - got, off + got);
              if (n === 0) throw new NotPredictable('a file shrank');
              got += n;
            }
            off += got;
            yield b;
            o.signal?.throwIfAborted();
          }
          if (size % BLOCK) yield Buffer.alloc(BLOCK - (size % BLOCK));
        } finally {
          closeSync(f.fd);
        }
      } else {
        throw new NotPredictable('a special file');
      }
    }
  }
  try {
    yield* walk(root, Buffer.alloc(0), 0);
  } finally {
    closeDir(root);
  }
  yield Buffer.alloc(2 * BLOCK);
}
