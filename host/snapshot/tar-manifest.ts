import { createHash } from 'node:crypto';
import { extract } from 'tar-stream';
import { BerthError } from '../errors';
import { nameString } from './confined/names';
import type { WorkspaceManifest } from './manifest';

/**
 * A name as bytes, kept as the scan keeps it (`confined/names.ts`): a plain header's bytes come
 * through as latin1 (one char per byte); a pax record is text, which tar-stream decodes as UTF-8,
 * so a name that is not UTF-8 there cannot be told apart and is refused by name, never changed.
 */
function kept(text: string, fromPax: boolean): string {
  if (!fromPax) return nameString(Buffer.from(text, 'latin1'));
  if (text.includes('\uFFFD')) throw new BerthError('snapshot_unrepresentable', `workspace path ${text}: a name that is not UTF-8 cannot be read back through the engine's archive; rename it`);
  return text;
}

/**
 * The manifest of a workspace read from a tar stream of it (the engine's archive of the
 * workspace directory, whose entries are named `<dir>/...`), in the same form as a scan gives.
 * Used while the container is paused: no exec can run then, but the engine still reads its
 * filesystem, as real root, so nothing is unreadable.
 */
export async function manifestFromTar(stream: NodeJS.ReadableStream, signal?: AbortSignal): Promise<WorkspaceManifest> {
  // tar-stream takes the option, its types do not say so.
  const ex = extract({ filenameEncoding: 'latin1' } as Parameters<typeof extract>[0]);
  stream.pipe(ex as unknown as NodeJS.WritableStream);
  const manifest: WorkspaceManifest = {};
  let root: string | undefined;
  for await (const entry of ex) {
    signal?.throwIfAborted();
    const h = entry.header;
    const pax = (h.pax ?? {}) as { path?: string; linkpath?: string };
    const name = kept(h.name, pax.path !== undefined).replace(/\/+$/, '');
    root ??= name.split('/')[0]!;
    const rel = name === root ? '' : `.${name.slice(root.length)}`;
    const mode = ((h.mode ?? 0) & 0o7777).toString(8);
    if (h.type === 'file' || h.type === 'contiguous-file') {
      const hash = createHash('sha256');
      for await (const chunk of entry) hash.update(chunk as Buffer);
      if (rel) manifest[rel] = `f:${mode}:${hash.digest('hex')}`;
      continue;
    }
    entry.resume();
    if (!rel) continue;
    if (h.type === 'directory') manifest[rel] = `d:${mode}`;
    else if (h.type === 'symlink') manifest[rel] = `l:${kept(h.linkname ?? '', pax.linkpath !== undefined)}`;
    else if (h.type === 'link') {
      // A hard link to a file archived earlier: same bytes, its own mode bits.
      const target = `.${kept(h.linkname ?? '', pax.linkpath !== undefined).replace(/\/+$/, '').slice(root.length)}`;
      manifest[rel] = `f:${mode}:${manifest[target]?.split(':')[2] ?? 'unreadable'}`;
    } else manifest[rel] = `o:${mode}`;
  }
  return manifest;
}
