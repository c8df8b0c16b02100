import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract } from 'tar-stream';
import { BerthError } from '../errors';
import { safeEntryName } from './archive-extract';
import { escapedBytes } from './archive-pack';
import { engineError } from './engine-errors';
import type { FileContext } from './file-ops';
import { isDir, isRegular, resolveInContainer } from './path-resolver';

/** One non-directory entry below a listed directory, as `find` saw it (symlinks not followed). */
export interface TreeFile {
  /** Relative to the workspace, `/`-separated. */
  path: string;
  /** Absolute in the container, below the listed directory's real path. */
  real: string;
  type: 'file' | 'symlink' | 'other';
  size: number;
  /** Set when the name is not UTF-8: its bytes as a message shows them (`out/u\\xff.bin`); `path` is then lossy. */
  unrepresentable?: string;
}

/** Where a listed path really is: a regular file inside the workspace, or why it is not one. */
export type RealFile = { ok: true; real: string; size: number } | { ok: false; why: 'escape' | 'not_a_file' | 'missing'; detail: string };

/**
 * Lists every non-directory entry below each of `dirs` (workspace-relative; '' is the workspace),
 * `maxDepth` levels deep (undefined: all). One exec as the workspace owner. `find` does not follow
 * symlinks, so a listed regular file lies in a real directory below the one listed; each listed
 * directory itself is resolved first, so a symlinked directory on the way that leads outside the
 * workspace is refused (`path_escape`) before anything below it is read.
 *
 * Names are read as bytes: a name may hold a newline (a line per entry would split it, and what
 * follows the newline may spell another entry) or bytes that are not UTF-8 (decoded, the name
 * names no file). Each batch of `find` says how many entries it has, their mode and size a line
 * each, then their paths NUL-terminated (the one byte no path holds). A path that is not UTF-8
 * is listed with `unrepresentable` set to its bytes as shown in a message.
 */
export async function listTree(ctx: FileContext, dirs: Array<{ dir: string; maxDepth?: number }>): Promise<TreeFile[]> {
  const ws = ctx.workspace;
  const roots: Array<{ real: string; rel: string; maxDepth?: number }> = [];
  for (const d of dirs) {
    const abs = d.dir === '' ? ws : posix.join(ws, d.dir);
    let r;
    try {
      r = await resolveInContainer(ctx.container, ws, abs);
    } catch (err) {
      if (err instanceof BerthError) throw err;
      throw engineError(`resolve ${d.dir || '.'}`, err, ctx.ids);
    }
    if (r.stat && isDir(r.stat)) roots.push({ real: r.real, rel: d.dir, maxDepth: d.maxDepth });
  }
  const out: TreeFile[] = [];
  for (const root of roots) {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const argv = ['find', root.real, '-mindepth', '1', ...(root.maxDepth === undefined ? [] : ['-maxdepth', String(root.maxDepth)]), '!', '-type', 'd', '-exec', 'sh', '-c', BATCH, 'sh', '{}', '+'];
    // The exec's own output is capped (head and tail kept); a listing cut in the middle would lose entries unsaid.
    const res = await ctx.exec(argv, {
      onOutput: (s, chunk) => {
        if (s !== 'stdout') return;
        bytes += chunk.length;
        if (bytes <= MAX_LISTING_BYTES) chunks.push(chunk);
      },
    });
    if (res.exitCode !== 0) throw new BerthError('artifact_list_failed', `listing ${root.rel || 'the workspace'} failed: ${res.stderr.trim().slice(0, 300)}`, { ids: ctx.ids });
    if (bytes > MAX_LISTING_BYTES) throw new BerthError('artifact_list_failed', `listing ${root.rel || 'the workspace'} is more than ${MAX_LISTING_BYTES} bytes; declare narrower artifact globs`, { ids: ctx.ids });
    const prefix = `${root.real === '/' ? '' : root.real}/`;
    for (const e of parseBatches(Buffer.concat(chunks), root.rel || 'the workspace', ctx)) {
      const real = e.path.toString('utf8');
      if (!real.startsWith(prefix)) continue;
      const below = real.slice(prefix.length);
      const fmt = e.mode & 0o170000;
      const file: TreeFile = { path: root.rel ? `${root.rel}/${below}` : below, real, type: fmt === 0o100000 ? 'file' : fmt === 0o120000 ? 'symlink' : 'other', size: e.size };
      if (!Buffer.from(real, 'utf8').equals(e.path)) {
        const rel = escapedBytes(e.path.subarray(Buffer.byteLength(prefix)));
        file.unrepresentable = root.rel ? `${root.rel}/${rel}` : rel;
      }
      out.push(file);
    }
  }
  return out;
}

/** Run by `find -exec ... {} +` for each batch of paths: their count, a mode:size line each, the paths NUL-terminated. */
const BATCH = 'printf "%d\\n" "$#" && stat -c "%f:%s" -- "$@" && printf "%s\\0" "$@"';
/** A listing bigger than this is refused rather than held in memory (about 300,000 entries of 200 bytes). */
const MAX_LISTING_BYTES = 64 * 1024 * 1024;

function parseBatches(buf: Buffer, what: string, ctx: FileContext): Array<{ mode: number; size: number; path: Buffer }> {
  const bad = () => new BerthError('artifact_list_failed', `listing ${what} failed: the listing is not in the expected form (the workspace changed while it was listed?)`, { ids: ctx.ids });
  const out: Array<{ mode: number; size: number; path: Buffer }> = [];
  let at = 0;
  const upTo = (byte: number) => {
    const end = buf.indexOf(byte, at);
    if (end < 0) throw bad();
    const part = buf.subarray(at, end);
    at = end + 1;
    return part;
  };
  while (at < buf.length) {
    const count = Number(upTo(0x0a).toString('latin1'));
    if (!Number.isSafeInteger(count) || count < 1) throw bad();
    const stats: Array<{ mode: number; size: number }> = [];
    for (let i = 0; i < count; i++) {
      const m = /^([0-9a-f]+):(\d+)$/.exec(upTo(0x0a).toString('latin1'));
      if (!m) throw bad();
      stats.push({ mode: parseInt(m[1]!, 16), size: Number(m[2]) });
    }
    for (const st of stats) out.push({ ...st, path: upTo(0x00) });
  }
  return out;
}

/**
 * Resolves a listed symlink (or re-checks any path) inside the container: a target outside the
 * workspace, a dangling link or a target that is not a regular file is said, not followed.
 */
export async function realFile(ctx: FileContext, rel: string): Promise<RealFile> {
  const abs = posix.join(ctx.workspace, rel);
  try {
    const r = await resolveInContainer(ctx.container, ctx.workspace, abs);
    if (!r.stat) return { ok: false, why: 'missing', detail: `${rel} does not exist (a dangling symlink?)` };
    if (!isRegular(r.stat)) return { ok: false, why: 'not_a_file', detail: `${rel} is not a regular file` };
    return { ok: true, real: r.real, size: r.stat.size };
  } catch (err) {
    if (err instanceof BerthError && err.code === 'path_escape') return { ok: false, why: 'escape', detail: err.message };
    throw engineError(`resolve ${rel}`, err, ctx.ids);
  }
}

/**
 * Streams one regular file out of the container to `sink`, which must consume the stream it is
 * given. The archive must hold exactly that file: an entry that is a link, has another name, climbs
 * with `..` or is larger than `maxBytes` is refused (`path_escape` / `artifact_too_large`), so a
 * path swapped after it was resolved never yields anything but the file that was checked.
 */
export async function copyFileOut<T>(ctx: FileContext, real: string, maxBytes: number, sink: (data: Readable, size: number, mode: number) => Promise<T>, signal?: AbortSignal): Promise<T> {
  let archive: Readable;
  try {
    archive = (await ctx.container.getArchive({ path: real, abortSignal: signal } as { path: string })) as unknown as Readable;
  } catch (err) {
    throw engineError(`copy ${real} out`, err, ctx.ids);
  }
  const ex = extract();
  const want = posix.basename(real);
  let result: { value: T } | undefined;
  const consume = (async () => {
    for await (const entry of ex) {
      const h = entry.header;
      const name = safeEntryName(h.name, 0);
      if (result !== undefined || h.type !== 'file' || name !== want) {
        entry.resume();
        throw new BerthError('path_escape', `archive of ${real} holds "${h.name}" (${h.type}) where only the regular file ${want} was expected`, { ids: ctx.ids, details: { path: real, entry: h.name, type: h.type } });
      }
      const size = h.size ?? 0;
      if (size > maxBytes) {
        entry.resume();
        throw new BerthError('artifact_too_large', `${real} is ${size} bytes now, more than the ${maxBytes} left for artifacts`, { ids: ctx.ids, details: { path: real, size, maxBytes } });
      }
      // The permission bits only (no setuid/setgid/sticky): what a fetched copy may be given back.
      result = { value: await sink(entry as unknown as Readable, size, (h.mode ?? 0o644) & 0o777) };
    }
  })();
  // A refused entry ends the transfer at once: the rest of the archive is not read.
  consume.catch(() => archive.destroy());
  await Promise.all([pipeline(archive, ex), consume]);
  if (!result) throw new BerthError('not_a_file', `${real} is not a regular file`, { ids: ctx.ids, details: { path: real } });
  return result.value;
}
