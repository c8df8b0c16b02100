import { createHash } from 'node:crypto';
import { extract } from 'tar-stream';
import type { WorkspaceManifest } from './manifest';

/**
 * The manifest of a workspace read from a tar stream of it (the engine's archive of the
 * workspace directory, whose entries are named `<dir>/...`), in the same form as a scan gives.
 * Used while the container is paused: no exec can run then, but the engine still reads its
 * filesystem, as real root, so nothing is unreadable.
 */
export async function manifestFromTar(stream: NodeJS.ReadableStream, signal?: AbortSignal): Promise<WorkspaceManifest> {
  const ex = extract();
  stream.pipe(ex as unknown as NodeJS.WritableStream);
  const manifest: WorkspaceManifest = {};
  let root: string | undefined;
  for await (const entry of ex) {
    signal?.throwIfAborted();
    const h = entry.header;
    const name = h.name.replace(/\/+$/, '');
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
    else if (h.type === 'symlink') manifest[rel] = `l:${h.linkname ?? ''}`;
    else if (h.type === 'link') {
      // A hard link to a file archived earlier: same bytes, its own mode bits.
      const target = `.${(h.linkname ?? '').replace(/\/+$/, '').slice(root.length)}`;
      manifest[rel] = `f:${mode}:${manifest[target]?.split(':')[2] ?? 'unreadable'}`;
    } else manifest[rel] = `o:${mode}`;
  }
  return manifest;
}
