import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { faultPoint } from '../../support';
import { timed } from '../timing';
import { engineLayerTar } from './engine-layer-tar';
import type { RegistryHttp } from './registry-http';

/** The layer as the registry holds it once an early upload is confirmed. */
export interface EarlyDescriptor {
  mediaType: string;
  digest: string;
  size: number;
}

/** A blob completed in the registry under the host's own hash of what it sent. */
type Sent = { digest: string; size: number };

/**
 * A `sync` snapshot's layer uploaded while the engine is still committing it: the host writes the
 * tar the engine's commit will write (`engine-layer-tar.ts`) from the container's upper directory
 * into an upload session (one streamed PATCH), hashing it as it goes, and completes the blob under
 * that hash at once (a PUT with the digest and no body; the registry checks it against what it
 * received), all while the commit runs. Once the commit names the layer's diff id, the push asks
 * {@link take}: when the hash is that diff id, the blob is already there and the push goes on to
 * the manifest with no request of its own for the layer; otherwise the push sends the engine's
 * layer as before. A manifest only ever names the engine's diff id, so a wrong guess never makes a
 * wrong layer: it leaves one blob no manifest names, which is left to the registry's garbage
 * collection rather than deleted. A DELETE could not be told apart from a later upload of the same
 * bytes (a retried snapshot of an unchanged container commits the same layer), and would then
 * unlink a blob a manifest names. {@link dispose} stops an upload nobody took (a reused image, a
 * delta, a failed snapshot); one already complete is left to garbage collection the same way.
 */
export class EarlyLayer {
  private sent: Promise<Sent | undefined> | undefined;
  private readonly stop = new AbortController();
  private taken = false;

  constructor(
    private readonly http: RegistryHttp,
    private readonly repo: string,
    private readonly o: { maxBytes: number; mediaType: string; session: (signal: AbortSignal) => Promise<string | undefined>; logger: Logger; signal?: AbortSignal },
  ) {}

  /** Starts the upload from the container's upper directory (the first call only: a retaken, paused commit reuses it, or misses). */
  start(upperDir: string): void {
    if (this.sent || this.taken) return;
    const signal = AbortSignal.any([this.stop.signal, ...(this.o.signal ? [this.o.signal] : [])]);
    this.sent = this.upload(upperDir, signal).catch((err: unknown) => {
      if (!signal.aborted) this.o.logger.debug({ err, repo: this.repo }, 'early layer upload not possible; the push sends the layer after the commit');
      return undefined;
    });
  }

  private async upload(upperDir: string, signal: AbortSignal): Promise<Sent | undefined> {
    const location = await this.o.session(signal);
    if (!location) return undefined;
    const hash = createHash('sha256');
    let size = 0;
    let first = true;
    const it = engineLayerTar(upperDir, { maxBytes: this.o.maxBytes, signal })[Symbol.asyncIterator]();
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        try {
          const n = await it.next();
          if (n.done) return c.close();
          hash.update(n.value);
          size += n.value.length;
          c.enqueue(n.value);
          if (first) {
            first = false;
            // Test hook: a host killed with a layer upload half sent (its session is left to the registry's purge).
            faultPoint('snapshot.push.early');
          }
        } catch (err) {
          c.error(err);
        }
      },
      async cancel() {
        await it.return?.(undefined);
      },
    });
    let res: Response;
    try {
      res = await this.http.request('PATCH', location, { headers: { 'content-type': 'application/octet-stream' }, body, signal });
    } catch (err) {
      void this.drop(location);
      throw err;
    }
    await res.body?.cancel().catch(() => {});
    const next = res.headers.get('location');
    if (res.status !== 202 || !next) {
      void this.drop(location);
      return undefined;
    }
    const digest = `sha256:${hash.digest('hex')}`;
    // Completed now, under the host's hash, while the engine may still be committing: the push then
    // has nothing left to send for the layer when that hash is the commit's diff id.
    const url = `${next}${next.includes('?') ? '&' : '?'}digest=${encodeURIComponent(digest)}`;
    const put = await timed(this.o.logger, 'snapshot.push_early_put', () => this.http.request('PUT', url, { signal }));
    await put.body?.cancel().catch(() => {});
    if (put.status !== 201) {
      void this.drop(next);
      return undefined;
    }
    // Test hook: a host killed with the blob complete under its own hash, no manifest naming it yet.
    faultPoint('snapshot.push.early_done');
    return { digest, size };
  }

  private async drop(location: string): Promise<void> {
    await this.http.request('DELETE', location).then((r) => r.body?.cancel(), () => {});
  }

  /**
   * The layer `diffId` as uploaded early, or `undefined` (not started, not possible, or other
   * bytes than the engine's: that blob is left to the registry's garbage collection). Waits for an
   * upload still on the wire: the rest of it is less than sending the whole layer again.
   */
  async take(diffId: string): Promise<EarlyDescriptor | undefined> {
    if (!this.sent || this.taken) return undefined;
    this.taken = true;
    // What is left of the upload when the commit ended (nothing, when it finished first).
    const sent = await timed(this.o.logger, 'snapshot.push_early_wait', () => this.sent!);
    if (!sent) return undefined;
    if (sent.digest !== diffId) {
      this.o.logger.debug({ repo: this.repo, guessed: sent.digest, diffId }, 'early layer upload was not the engine layer; its blob is left to the registry\'s garbage collection');
      return undefined;
    }
    return { mediaType: this.o.mediaType, digest: diffId, size: sent.size };
  }

  /** Stops an upload nobody took (idempotent); a blob it already completed is left to the registry's garbage collection. */
  dispose(): void {
    if (this.taken) return;
    this.taken = true;
    this.stop.abort();
  }
}
