import { Readable } from 'node:stream';
import { BerthError } from '../errors';
import type { ArtifactStore, BlobState } from './artifact-store';
import { digestOf, hashing } from './local-store';

const HEX = /^[0-9a-f]{64}$/;

/**
 * An {@link ArtifactStore} on an OCI registry: blobs of one repository over the distribution HTTP
 * API (`/v2/<repo>/blobs/…`). `put` streams the bytes in one chunked upload session (POST, PATCH,
 * then PUT with the digest computed on the way; the registry checks it too), `check` and `open`
 * GET the blob and the caller's hash decides. TLS comes from the URL (`https://`); credentials are
 * not handled here (a registry on loopback, or a proxy that adds them), so none reach store or logs.
 *
 * Not yet: a manifest referencing a run's blobs, so a registry's offline garbage collection keeps
 * them; until then run the registry without `garbage-collect`, or push such a manifest per run.
 */
export class RegistryArtifactStore implements ArtifactStore {
  readonly location: string;
  private readonly base: string;

  /** `url`: `http(s)://host:port/<repository>`, e.g. `http://127.0.0.1:5000/berth/artifacts`. */
  constructor(url: string) {
    const u = new URL(url);
    const repo = u.pathname.replace(/^\/+|\/+$/g, '');
    if (!repo || !/^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$/.test(repo)) {
      throw new BerthError('artifact_store_invalid', `artifact registry URL ${url} needs a repository path in lowercase (http://host:port/berth/artifacts)`);
    }
    this.base = `${u.protocol}//${u.host}/v2/${repo}`;
    this.location = `${u.protocol}//${u.host}/${repo}`;
  }

  private blobUrl(sha256: string): string {
    if (!HEX.test(sha256)) throw new BerthError('artifact_digest_invalid', `"${sha256}" is not a sha256 hex digest`);
    return `${this.base}/blobs/sha256:${sha256}`;
  }

  private absolute(location: string | null, what: string): string {
    if (!location) throw new BerthError('artifact_store_error', `registry ${this.location}: ${what} answered without a Location`, { retryable: true });
    return new URL(location, this.base).toString();
  }

  private async call(what: string, url: string, init: RequestInit & { duplex?: 'half' }): Promise<Response> {
    try {
      return await fetch(url, init);
    } catch (err) {
      throw new BerthError('artifact_store_unreachable', `registry ${this.location}: ${what} failed: ${(err as Error).message}`, { retryable: true, cause: err });
    }
  }

  private async failed(what: string, res: Response): Promise<BerthError> {
    const body = (await res.text().catch(() => '')).slice(0, 300);
    return new BerthError('artifact_store_error', `registry ${this.location}: ${what} answered ${res.status}: ${body}`, { retryable: res.status >= 500, details: { status: res.status } });
  }

  async put(source: Readable, opts: { signal?: AbortSignal } = {}): Promise<{ sha256: string; size: number }> {
    const start = await this.call('starting an upload', `${this.base}/blobs/uploads/`, { method: 'POST', signal: opts.signal });
    if (start.status !== 202) throw await this.failed('starting an upload', start);
    const h = hashing();
    // The body is the source as it streams through the hash: no temporary copy on this host.
    const body = Readable.toWeb(source.pipe(h)) as unknown as ReadableStream;
    const patch = await this.call('uploading', this.absolute(start.headers.get('location'), 'the upload start'), {
      method: 'PATCH',
      headers: { 'content-type': 'application/octet-stream' },
      body,
      duplex: 'half',
      signal: opts.signal,
    });
    if (patch.status !== 202) throw await this.failed('uploading', patch);
    const d = h.digest();
    const done = new URL(this.absolute(patch.headers.get('location'), 'the upload'));
    done.searchParams.set('digest', `sha256:${d.sha256}`);
    const put = await this.call('completing the upload', done.toString(), { method: 'PUT', headers: { 'content-length': '0' }, signal: opts.signal });
    if (put.status !== 201) throw await this.failed('completing the upload', put);
    return d;
  }

  async check(sha256: string, size: number, opts: { signal?: AbortSignal } = {}): Promise<BlobState> {
    const res = await this.call('reading a blob', this.blobUrl(sha256), { signal: opts.signal });
    if (res.status === 404) {
      await res.body?.cancel();
      return 'missing';
    }
    if (res.status !== 200 || !res.body) throw await this.failed('reading a blob', res);
    const d = await digestOf(Readable.fromWeb(res.body as never), opts.signal);
    return d.sha256 === sha256 && d.size === size ? 'present' : 'altered';
  }

  async open(sha256: string): Promise<Readable> {
    const res = await this.call('reading a blob', this.blobUrl(sha256), {});
    if (res.status === 404) {
      await res.body?.cancel();
      throw new BerthError('artifact_missing', `blob sha256:${sha256} is not in the artifact registry ${this.location}`, { details: { sha256 } });
    }
    if (res.status !== 200 || !res.body) throw await this.failed('reading a blob', res);
    return Readable.fromWeb(res.body as never);
  }
}

