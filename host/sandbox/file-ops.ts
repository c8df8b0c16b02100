import type Dockerode from 'dockerode';
import { mkdir, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { BerthError, type ErrorIds } from '../errors';
import { extractArchive, readSingleFile } from './archive-extract';
import { packHostDir, scanHostDir, singleFileTar, type Owner, type SkippedEntry } from './archive-pack';
import type { DiskGuard } from './disk-guard';
import { engineError } from './engine-errors';
import type { ExecOptions, ExecResult } from './exec-types';
import { isDir, isRegular, isSymlink, resolveInContainer, type ResolvedPath } from './path-resolver';
import { workspacePath } from './workspace-path';

/** One directory entry as {@link FileOps.list} reports it. */
export interface DirEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  mtimeMs: number;
}

export interface FileContext {
  container: Dockerode.Container;
  workspace: string;
  owner: Owner;
  disk: DiskGuard;
  ids: ErrorIds;
  /** Runs a helper command as the workspace owner (used by `list`). */
  exec(argv: string[], opts?: Pick<ExecOptions, 'onOutput'>): Promise<ExecResult>;
}

const DEFAULT_MAX_READ = 256 * 1024 * 1024;

async function resolvePath(ctx: FileContext, path: string): Promise<ResolvedPath> {
  const abs = workspacePath(ctx.workspace, path);
  try {
    return await resolveInContainer(ctx.container, ctx.workspace, abs);
  } catch (err) {
    throw engineError(`resolve ${path}`, err, ctx.ids);
  }
}

function notFound(path: string, ids: ErrorIds): BerthError {
  return new BerthError('not_found', `${path} does not exist in the sandbox`, { ids, details: { path } });
}

/** Reads one regular file of the workspace. */
export async function readFile(ctx: FileContext, path: string, opts: { maxBytes?: number } = {}): Promise<Buffer> {
  const r = await resolvePath(ctx, path);
  if (!r.stat) throw notFound(path, ctx.ids);
  if (!isRegular(r.stat)) throw new BerthError('not_a_file', `${path} is not a regular file`, { ids: ctx.ids, details: { path } });
  let archive: Readable;
  try {
    archive = (await ctx.container.getArchive({ path: r.real })) as unknown as Readable;
  } catch (err) {
    throw engineError(`read ${path}`, err, ctx.ids);
  }
  return readSingleFile(archive, opts.maxBytes ?? DEFAULT_MAX_READ, path);
}

/** Refuses an upload that would take the writable layer over the disk limit. */
async function checkRoom(ctx: FileContext, bytes: number, path: string): Promise<void> {
  if (!ctx.disk.mayExceed(bytes)) return;
  const used = await ctx.disk.measure();
  if (used + bytes > ctx.disk.limitBytes) {
    throw new BerthError('disk_limit', `writing ${bytes} bytes to ${path} would exceed the sandbox disk limit`, {
      ids: ctx.ids,
      details: { path, bytes, usedBytes: used, limitBytes: ctx.disk.limitBytes },
    });
  }
}

/**
 * Writes a file (following an in-workspace symlink like `fs.writeFile` does), creating missing
 * parent directories owned by the workspace owner.
 */
export async function writeFile(ctx: FileContext, path: string, data: Buffer | string, opts: { mode?: number } = {}): Promise<void> {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  const r = await resolvePath(ctx, path);
  if (r.stat && isDir(r.stat)) throw new BerthError('is_a_directory', `${path} is a directory`, { ids: ctx.ids, details: { path } });
  await checkRoom(ctx, bytes.length, path);
  // The archive goes to the deepest existing real directory; the rest of the path is in the tar.
  const missing = r.stat ? [posix.basename(r.real)] : r.missing;
  const base = r.stat ? posix.dirname(r.real) : r.existingAncestor;
  const tar = await singleFileTar(missing, bytes, opts.mode ?? 0o644, ctx.owner);
  try {
    await ctx.container.putArchive(tar, { path: base, noOverwriteDirNonDir: true });
  } catch (err) {
    throw engineError(`write ${path}`, err, ctx.ids);
  }
  ctx.disk.noteBytes(bytes.length);
}

/** Lists one directory (not recursive). */
export async function list(ctx: FileContext, path: string): Promise<DirEntry[]> {
  const r = await resolvePath(ctx, path);
  if (!r.stat) throw notFound(path, ctx.ids);
  if (!isDir(r.stat)) throw new BerthError('not_a_directory', `${path} is not a directory`, { ids: ctx.ids, details: { path } });
  // One exec, whatever the size of the tree below (an archive would carry every file's content).
  const res = await ctx.exec(['find', r.real, '-mindepth', '1', '-maxdepth', '1', '-exec', 'stat', '-c', '%f:%s:%Y:%n', '{}', '+']);
  if (res.exitCode !== 0) {
    throw new BerthError('list_failed', `listing ${path} failed: ${res.stderr.trim()}`, { ids: ctx.ids, details: { path, exitCode: res.exitCode } });
  }
  const entries: DirEntry[] = [];
  const prefix = `${r.real === '/' ? '' : r.real}/`;
  const line = new RegExp(`^([0-9a-f]+):(\\d+):(\\d+):${escapeRe(prefix)}`);
  // Every entry's line ends with a newline: only the text after the last one is not part of a name.
  for (const text of res.stdout.replace(/\n$/, '').split('\n')) {
    const m = line.exec(text);
    if (!m) {
      // A name containing a newline continues the previous entry; an empty piece is part of it too
      // (a name ending in a newline, or holding two in a row, lost them).
      const last = entries[entries.length - 1];
      if (last) last.name += `\n${text}`;
      continue;
    }
    const rawMode = parseInt(m[1]!, 16);
    const fmt = rawMode & 0o170000;
    entries.push({
      name: text.slice(m[0].length),
      type: fmt === 0o100000 ? 'file' : fmt === 0o040000 ? 'dir' : fmt === 0o120000 ? 'symlink' : 'other',
      size: Number(m[2]),
      mtimeMs: Number(m[3]) * 1000,
    });
  }
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Uploads a host directory's contents into `toPath`, owned by the workspace owner. */
export async function uploadDir(ctx: FileContext, hostDir: string, toPath: string): Promise<{ files: number; bytes: number; skipped: SkippedEntry[] }> {
  const scan = await scanHostDir(hostDir);
  const r = await resolvePath(ctx, toPath);
  if (r.stat && !isDir(r.stat)) throw new BerthError('not_a_directory', `${toPath} exists and is not a directory`, { ids: ctx.ids });
  await checkRoom(ctx, scan.bytes, toPath);
  const base = r.stat ? r.real : r.existingAncestor;
  const tar = packHostDir(resolve(hostDir), scan.entries, r.stat ? [] : r.missing, ctx.owner);
  try {
    await ctx.container.putArchive(tar as unknown as NodeJS.ReadableStream, { path: base, noOverwriteDirNonDir: true });
  } catch (err) {
    throw engineError(`upload to ${toPath}`, err, ctx.ids);
  }
  ctx.disk.noteBytes(scan.bytes);
  return { files: scan.entries.filter((e) => e.kind === 'file').length, bytes: scan.bytes, skipped: scan.skipped };
}

/**
 * Downloads a workspace directory's contents to `hostDir`, which must not exist or be empty. The
 * archive is extracted into a sibling staging directory and renamed into place only when every
 * entry passed the checks, so a refused archive leaves nothing behind.
 */
export async function downloadDir(ctx: FileContext, path: string, hostDir: string): Promise<{ files: number; bytes: number }> {
  const r = await resolvePath(ctx, path);
  if (!r.stat) throw notFound(path, ctx.ids);
  if (!isDir(r.stat) || isSymlink(r.stat)) throw new BerthError('not_a_directory', `${path} is not a directory`, { ids: ctx.ids });
  const target = resolve(hostDir);
  const existing = await stat(target).catch(() => undefined);
  if (existing && (!existing.isDirectory() || (await readdir(target)).length > 0)) {
    throw new BerthError('target_not_empty', `${hostDir} exists and is not an empty directory`, { ids: ctx.ids });
  }
  await mkdir(dirname(target), { recursive: true });
  const staging = join(dirname(target), `.${basename(target)}.berth-partial-${randomBytes(4).toString('hex')}`);
  await mkdir(staging, { mode: 0o700 });
  try {
    let archive: Readable;
    try {
      archive = (await ctx.container.getArchive({ path: r.real })) as unknown as Readable;
    } catch (err) {
      throw engineError(`download ${path}`, err, ctx.ids);
    }
    const counts = await extractArchive(archive, staging, { strip: 1, sourceRoot: r.real });
    if (existing) await rmdir(target);
    await rename(staging, target);
    return counts;
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
}
