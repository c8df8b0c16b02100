import { createWriteStream } from 'node:fs';
import { link, mkdir, symlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract, type Header } from 'tar-stream';
import { BerthError } from '../errors';

/**
 * The name of an archive entry relative to the extraction root, or a `path_escape` error when the
 * entry is absolute or climbs out with `..`. `strip` drops leading components (the engine puts the
 * requested directory's own name first).
 */
export function safeEntryName(name: string, strip: number): string | undefined {
  if (name.startsWith('/') || name.includes('\0')) throw escape(name, 'absolute path');
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw escape(name, '".." component');
  const kept = parts.slice(strip);
  return kept.length === 0 ? undefined : kept.join('/');
}

function escape(name: string, why: string, linkname?: string): BerthError {
  return new BerthError('path_escape', `archive entry "${name}"${linkname === undefined ? '' : ` -> "${linkname}"`} refused: ${why}`, {
    details: { entry: name, linkname },
  });
}

export interface ExtractOptions {
  /** Leading components to drop from every entry name. */
  strip: number;
  /**
   * Where the archive's root lives in the container; an absolute symlink into it is rewritten to a
   * relative one, any other absolute symlink is refused.
   */
  sourceRoot?: string;
}

/**
 * Extracts a tar coming from the sandbox into `target` (an empty directory this process just
 * created), refusing entries that are absolute, contain `..`, or are symlinks or hard links
 * resolving outside `target`. Links are created only after every regular entry is written, so no
 * entry can be written through a link from the same archive. Devices and fifos are skipped.
 */
export async function extractArchive(source: Readable, target: string, opts: ExtractOptions): Promise<{ files: number; bytes: number }> {
  const ex = extract();
  const links: Array<{ rel: string; header: Header; linkTo: string }> = [];
  const plain: string[] = [];
  let files = 0;
  let bytes = 0;
  const consume = (async () => {
    for await (const entry of ex) {
      const h = entry.header;
      const rel = safeEntryName(h.name, opts.strip);
      if (rel === undefined || (h.type !== 'file' && h.type !== 'contiguous-file' && h.type !== 'directory' && h.type !== 'symlink' && h.type !== 'link')) {
        entry.resume();
        continue;
      }
      const dest = join(target, rel);
      if (h.type === 'directory' || h.type === 'file' || h.type === 'contiguous-file') plain.push(rel);
      if (h.type === 'directory') {
        await mkdir(dest, { recursive: true, mode: (h.mode & 0o777) | 0o700 });
        entry.resume();
      } else if (h.type === 'symlink') {
        links.push({ rel, header: h, linkTo: symlinkText(rel, h, opts) });
        entry.resume();
      } else if (h.type === 'link') {
        const to = safeEntryName(h.linkname, opts.strip);
        if (to === undefined) throw escape(h.name, 'hard link to the archive root', h.linkname);
        links.push({ rel, header: h, linkTo: to });
        entry.resume();
      } else {
        await mkdir(posix.dirname(dest), { recursive: true });
        // 'wx': never open something that already exists, link or not.
        await pipeline(entry, createWriteStream(dest, { flags: 'wx', mode: h.mode & 0o777 }));
        files += 1;
        bytes += h.size;
      }
    }
  })();
  await Promise.all([pipeline(source, ex), consume]);
  checkLinks(links, plain);
  for (const l of links) {
    const dest = join(target, l.rel);
    await mkdir(posix.dirname(dest), { recursive: true });
    if (l.header.type === 'symlink') await symlink(l.linkTo, dest);
    else await link(join(target, l.linkTo), dest);
  }
  return { files, bytes };
}

/** The text of a symlink as it will be written: absolute targets inside `sourceRoot` become relative. */
function symlinkText(rel: string, h: Header, opts: ExtractOptions): string {
  const linkname = h.linkname;
  if (!linkname.startsWith('/')) return linkname;
  const root = opts.sourceRoot;
  const norm = posix.normalize(linkname);
  if (root === undefined || !(norm === root || norm.startsWith(`${root}/`))) throw escape(h.name, 'absolute symlink outside the directory', linkname);
  return posix.relative(posix.dirname(posix.join(root, rel)), norm) || '.';
}

/**
 * Refuses the archive when any link would lead outside the extraction root. Lexical checks are not
 * enough once links point through other links (`a -> .` then `a/b -> ../x`), so every target is
 * resolved against the archive's own set of symlinks, the way the kernel would follow them, and
 * no entry may live below a symlink.
 */
function checkLinks(links: Array<{ rel: string; header: Header; linkTo: string }>, plain: string[]): void {
  const symlinks = new Map<string, string>();
  for (const l of links) if (l.header.type === 'symlink') symlinks.set(l.rel, l.linkTo);
  if (links.length === 0) return;
  const plainSet = new Set(plain);
  for (const rel of [...plain, ...links.map((l) => l.rel)]) {
    const parts = rel.split('/');
    for (let i = 1; i <= parts.length; i += 1) {
      const prefix = parts.slice(0, i).join('/');
      const below = i < parts.length;
      if (symlinks.has(prefix) && (below || plainSet.has(rel))) throw escape(rel, below ? 'entry below a symlink' : 'symlink over another entry');
    }
  }
  for (const l of links) {
    const parts = l.rel.split('/');
    const from = l.header.type === 'symlink' ? parts.slice(0, -1) : [];
    if (resolveWithin(symlinks, from, l.linkTo, 0) === undefined) throw escape(l.header.name, 'link outside the directory', l.header.linkname);
  }
}

/** Follows `target` from directory `from` through `symlinks`; undefined when it leaves the root or loops. */
function resolveWithin(symlinks: Map<string, string>, from: string[], target: string, depth: number): string[] | undefined {
  if (depth > 32 || target.startsWith('/')) return undefined;
  let stack = [...from];
  for (const comp of target.split('/')) {
    if (comp === '' || comp === '.') continue;
    if (comp === '..') {
      if (stack.length === 0) return undefined;
      stack.pop();
      continue;
    }
    stack.push(comp);
    const link = symlinks.get(stack.join('/'));
    if (link !== undefined) {
      const next = resolveWithin(symlinks, stack.slice(0, -1), link, depth + 1);
      if (next === undefined) return undefined;
      stack = next;
    }
  }
  return stack;
}

/** Reads the single regular file a `GET archive` of a file path returns, up to `maxBytes`. */
export async function readSingleFile(source: Readable, maxBytes: number, path: string): Promise<Buffer> {
  const ex = extract();
  let result: Buffer | undefined;
  const consume = (async () => {
    for await (const entry of ex) {
      const h = entry.header;
      if (result !== undefined || (h.type !== 'file' && h.type !== 'contiguous-file')) {
        // A symlink here means the path changed under us after it was resolved.
        if (h.type === 'symlink' || h.type === 'link') throw escape(h.name, 'link where a file was expected', h.linkname);
        entry.resume();
        continue;
      }
      if (h.size > maxBytes) throw new BerthError('file_too_large', `${path} is ${h.size} bytes, more than the ${maxBytes} allowed`, { details: { path, size: h.size, maxBytes } });
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      result = Buffer.concat(chunks);
    }
  })();
  await Promise.all([pipeline(source, ex), consume]);
  if (result === undefined) throw new BerthError('not_a_file', `${path} is not a regular file`, { details: { path } });
  return result;
}
