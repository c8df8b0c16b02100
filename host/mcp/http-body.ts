import type { IncomingMessage } from 'node:http';

/**
 * A request body read up to a bound: its text, or how it went over. `drained`: the rest of a body
 * over the bound was read to its end and dropped, so the answer reaches a client still sending it.
 */
export type BoundedBody = { kind: 'text'; text: string } | { kind: 'too_large'; bytes: number | null; drained: boolean };

/**
 * Reads a request's body, refusing it once it is known to pass `maxBytes`: from its declared
 * Content-Length, else once the bytes read pass it (a chunked body), so a client streaming gigabytes
 * costs the server at most `maxBytes` of memory. A refused body up to `drainBytes` in all is then
 * read to its end and dropped: a server that closes a socket with unread bytes sends a reset, and a
 * client still writing its body lost the 413 to ECONNRESET (every time here, for an 11 MiB body).
 * Past `drainBytes` nothing more is read, and the caller cuts the connection after answering.
 */
export function readBounded(req: IncomingMessage, maxBytes: number, drainBytes = 8 * maxBytes): Promise<BoundedBody> {
  const declared = Number(req.headers['content-length']);
  const known = Number.isFinite(declared) ? declared : null;
  if (known !== null && known > drainBytes) return Promise.resolve({ kind: 'too_large', bytes: known, drained: false });
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = known !== null && known > maxBytes;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > drainBytes) {
        req.pause();
        resolve({ kind: 'too_large', bytes: known, drained: false });
        return;
      }
      if (size > maxBytes) over = true;
      if (over) chunks.length = 0;
      else chunks.push(chunk);
    });
    req.once('end', () => resolve(over ? { kind: 'too_large', bytes: known, drained: true } : { kind: 'text', text: Buffer.concat(chunks).toString('utf8') }));
    req.once('error', reject);
  });
}
