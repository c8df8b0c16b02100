import { BerthError } from '../../errors';
import { schemes, tokenFor, type RegistryAuth } from './manifest-delete';

const REQUEST_TIMEOUT_MS = 60_000;

/**
 * Requests to one registry (Docker Registry HTTP API v2) from this process: plain HTTP for a
 * loopback registry, HTTPS first otherwise; Basic credentials, or a bearer token when challenged.
 * Node's fetch keeps connections alive, so a push of a few blobs and a manifest costs a few round
 * trips on open sockets. A failure to connect is `registry_unreachable` (retryable); a 5xx is
 * retryable too; the caller reads other statuses.
 */
export class RegistryHttp {
  private scheme: string | undefined;
  private bearer: string | undefined;

  constructor(
    readonly registry: string,
    private readonly auth?: RegistryAuth,
  ) {
    // A registry with one possible scheme (loopback: plain HTTP only) is known before any request,
    // so whether a run's first snapshot streams its layer early does not hang on a request still in
    // flight (the base push's read-back): the same run behaves the same on a loaded machine.
    const only = schemes(registry);
    if (only.length === 1) this.scheme = only[0];
  }

  /** Whether this registry's scheme is known: a request body sent as a stream can be sent once only, so it is not tried on two. */
  get settled(): boolean {
    return this.scheme !== undefined;
  }

  private basic(): string | undefined {
    return this.auth ? `Basic ${Buffer.from(`${this.auth.username}:${this.auth.password}`).toString('base64')}` : undefined;
  }

  /** `path` is `/v2/...` or an absolute upload location the registry gave. */
  async request(method: string, path: string, init: { headers?: Record<string, string>; body?: Buffer | ReadableStream<Uint8Array>; signal?: AbortSignal } = {}): Promise<Response> {
    const signal = AbortSignal.any([...(init.signal ? [init.signal] : []), AbortSignal.timeout(REQUEST_TIMEOUT_MS)]);
    let lastErr: unknown;
    for (const scheme of this.scheme ? [this.scheme] : schemes(this.registry)) {
      const url = /^https?:\/\//.test(path) ? path : `${scheme}://${this.registry}${path}`;
      const send = (authorization?: string) => fetch(url, { method, headers: { ...init.headers, ...(authorization ? { authorization } : {}) }, body: init.body as unknown as RequestInit['body'], signal, redirect: 'follow', ...(init.body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit);
      try {
        let res = await send(this.bearer ? `Bearer ${this.bearer}` : this.basic());
        // A streamed body is spent: its caller sends the bytes again, which then meets the challenge.
        if (res.status === 401 && !(init.body instanceof ReadableStream)) {
          await res.body?.cancel().catch(() => {});
          this.bearer = await tokenFor(res.headers.get('www-authenticate'), this.basic(), signal);
          if (this.bearer) res = await send(`Bearer ${this.bearer}`);
        }
        this.scheme = scheme;
        if (res.status >= 500) {
          const text = await res.text().catch(() => '');
          throw new BerthError('registry_unreachable', `${method} ${path}: registry ${this.registry} answered HTTP ${res.status} (${text.slice(0, 200).trim()})`, { retryable: true, details: { registry: this.registry, status: String(res.status) } });
        }
        return res;
      } catch (err) {
        if (err instanceof BerthError) throw err;
        init.signal?.throwIfAborted();
        lastErr = err;
      }
    }
    const why = (lastErr as { cause?: { code?: string } })?.cause?.code ?? (lastErr instanceof Error ? lastErr.message : String(lastErr));
    throw new BerthError('registry_unreachable', `${method} ${path}: registry ${this.registry} unreachable (${why})`, { retryable: true, details: { registry: this.registry } });
  }
}
