import type { IncomingMessage } from 'node:http';

/** A request body read up to a bound: its text, or how it went over. */
export type BoundedBody = { kind: 'text'; text: string } | { kind: 'too_large'; bytes: number | null };

/**
 * Reads a request's body, refusing it as soon as it is known to pass `maxBytes`: from its declared
 * Content-Length before reading anything, else once the bytes read pass it (a chunked body), so a
 * client streaming gigabytes costs the server at most `maxBytes` of memory. What was not read is
 * left to the caller, which answers and closes the connection.
 */
export function readBounded(req: IncomingMessage, maxBytes: number): Promise<BoundedBody> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve({ kind: 'too_large', bytes: declared });
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.off('data', onData);
        req.pause();
        resolve({ kind: 'too_large', bytes: null });
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve({ kind: 'text', text: Buffer.concat(chunks).toString('utf8') }));
    req.once('error', reject);
  });
}
