import { createHash } from 'node:crypto';
import { writeSync } from 'node:fs';
import { canonicalJson } from './canonical';

/**
 * An array member of a document that is written item by item, each item given as its canonical
 * text, and never held whole: a long run's tasks, entries or commits read from the store in pages.
 */
export class StreamedArray {
  constructor(readonly texts: () => AsyncIterable<string>) {}
}

/** Whether a plain object holds a streamed array in its first few levels (where the record puts them). */
function holdsStream(v: unknown, depth = 0): boolean {
  if (v instanceof StreamedArray) return true;
  if (depth > 3 || v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  for (const k in v) if (holdsStream((v as Record<string, unknown>)[k], depth + 1)) return true;
  return false;
}

const sortedDefined = (o: Record<string, unknown>): string[] =>
  Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

/** Text gathered into chunks of about 64 KiB before it is handed on (a write or a hash update per member would dominate). */
class Chunks {
  private parts: string[] = [];
  private size = 0;
  constructor(private readonly onChunk: (text: string) => void) {}
  push(text: string): void {
    this.parts.push(text);
    this.size += text.length;
    if (this.size >= 1 << 16) this.flush();
  }
  flush(): void {
    if (this.size === 0 && this.parts.length === 0) return;
    const text = this.parts.join('');
    this.parts = [];
    this.size = 0;
    this.onChunk(text);
  }
}

const DIGEST_PLACEHOLDER = `sha256:${'0'.repeat(64)}`;

/**
 * Writes a sealed record to an open file: the same bytes as `sealRecord` (host/record/canonical.ts)
 * gives for the document with every streamed array read out, written as they are produced. The
 * digest covers the canonical text without the `digest` member, so it is hashed on the way and
 * written last into the place kept for it (a digest always has the same length).
 */
export async function writeSealedRecord(doc: Record<string, unknown>, fd: number, signal?: AbortSignal): Promise<{ digest: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const file = new Chunks((text) => {
    const b = Buffer.from(text, 'utf8');
    writeSync(fd, b, 0, b.length, bytes);
    bytes += b.length;
  });
  const hashed = new Chunks((text) => hash.update(text, 'utf8'));
  const both = (text: string) => (file.push(text), hashed.push(text));

  const value = async (v: unknown): Promise<void> => {
    if (v instanceof StreamedArray) {
      both('[');
      let first = true;
      for await (const text of v.texts()) {
        signal?.throwIfAborted();
        if (!first) both(',');
        both(text);
        first = false;
      }
      both(']');
      return;
    }
    if (!holdsStream(v)) return both(canonicalJson(v));
    const o = v as Record<string, unknown>;
    both('{');
    for (const [i, k] of sortedDefined(o).entries()) {
      both(`${i ? ',' : ''}${JSON.stringify(k)}:`);
      await value(o[k]);
    }
    both('}');
  };

  // The file lists `digest` at its sorted place; the hashed text leaves it out, so each side keeps its own separators.
  const keys = [...sortedDefined(doc).filter((k) => k !== 'digest'), 'digest'].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let fileFirst = true;
  let hashFirst = true;
  let digestAt = -1;
  file.push('{');
  hashed.push('{');
  for (const k of keys) {
    const member = `${JSON.stringify(k)}:`;
    if (k === 'digest') {
      file.push(`${fileFirst ? '' : ','}${member}"`);
      file.flush();
      digestAt = bytes;
      file.push(`${DIGEST_PLACEHOLDER}"`);
      fileFirst = false;
      continue;
    }
    file.push(`${fileFirst ? '' : ','}${member}`);
    hashed.push(`${hashFirst ? '' : ','}${member}`);
    fileFirst = hashFirst = false;
    await value(doc[k]);
  }
  file.push('}\n');
  hashed.push('}');
  file.flush();
  hashed.flush();
  const digest = `sha256:${hash.digest('hex')}`;
  writeSync(fd, digest, digestAt, 'utf8');
  return { digest, bytes };
}
