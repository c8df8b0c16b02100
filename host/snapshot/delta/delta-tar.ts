import { extract, pack } from 'tar-stream';

/** A tar header as tar-stream takes it. */
export type TarHeader = Parameters<ReturnType<typeof pack>['entry']>[0];

/** One entry of a layer: its header, and its bytes for a file. */
export interface TarEntry {
  name: string;
  header: TarHeader;
  data?: Buffer;
}

/** The entries as one tar, in the order given. */
export async function packEntries(entries: TarEntry[]): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (c: unknown) => void chunks.push(c as Buffer));
  const done = new Promise<void>((resolve, reject) => {
    tar.on('end', resolve);
    tar.on('error', reject);
  });
  // An empty buffer, not none, for a file: a file entry without one waits for its bytes.
  for (const e of entries) (e.data ? tar.entry(e.header, e.data) : tar.entry(e.header));
  tar.finalize();
  await done;
  return Buffer.concat(chunks);
}

const same = (a: unknown, b: unknown) => (a ?? null) === (b ?? null);

/**
 * Reads the tar back and compares every header field the layer depends on with what was meant:
 * a value the writer cannot encode (a time after January 2038 went through a 32-bit integer and
 * the engine refused the layer as an invalid tar header) shows here, before the layer is kept
 * and a record names its image. The engine's own reader may be stricter still; this catches the
 * writer's silent losses. `undefined` when it all reads back; else the first entry that does not.
 */
export async function readsBack(tar: Buffer, entries: TarEntry[]): Promise<string | undefined> {
  const seen: Array<{ name: string; type?: string | null; mode?: number; uid?: number; gid?: number; mtime?: Date; size?: number; linkname?: string | null }> = [];
  const x = extract();
  const done = new Promise<void>((resolve, reject) => {
    x.on('entry', (h, stream, next) => {
      seen.push({ ...h });
      stream.on('end', () => next());
      stream.resume();
    });
    x.on('finish', resolve);
    x.on('error', reject);
  });
  x.end(tar);
  await done;
  if (seen.length !== entries.length) return `${entries.length} entries written, ${seen.length} read back`;
  for (let i = 0; i < entries.length; i++) {
    const want = entries[i]!.header;
    const got = seen[i]!;
    const ok =
      got.name.replace(/\/$/, '') === want.name.replace(/\/$/, '') &&
      same(got.type, want.type) &&
      same(got.mode, want.mode) &&
      same(got.uid, want.uid) &&
      same(got.gid, want.gid) &&
      same(got.size ?? 0, want.size ?? 0) &&
      same(got.mtime?.getTime(), want.mtime?.getTime()) &&
      same(got.linkname ?? null, want.linkname ?? null);
    if (!ok) return `${want.name} does not read back as written`;
  }
  return undefined;
}
