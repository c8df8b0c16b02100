import { BerthError } from '../../errors';

/** Credentials for one registry (from the Docker client configuration; never stored or logged). */
export interface RegistryAuth {
  username: string;
  password: string;
}

/** What the registry said: the manifest is gone now, or was not there. */
export type ManifestDeleteOutcome = 'deleted' | 'absent';

const DELETE_TIMEOUT_MS = 30_000;

/** `host[:port]/repo/path@sha256:…` → its parts. */
export function parseManifestRef(ref: string): { registry: string; repo: string; digest: string } {
  const at = ref.lastIndexOf('@');
  const slash = ref.indexOf('/');
  if (at < 0 || slash < 0 || slash > at || !/^sha256:[0-9a-f]{64}$/.test(ref.slice(at + 1))) {
    throw new BerthError('registry_ref_invalid', `not a manifest reference by digest: ${ref}`);
  }
  return { registry: ref.slice(0, slash), repo: ref.slice(slash + 1, at), digest: ref.slice(at + 1) };
}

/** Loopback registries speak plain HTTP (as the engine allows for 127.0.0.0/8); others HTTPS first. */
export function schemes(registry: string): string[] {
  const host = registry.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  return /^(127\.\d+\.\d+\.\d+|localhost|::1)$/.test(host) ? ['http'] : ['https', 'http'];
}

const unreachable = (registry: string, ref: string, err: unknown) =>
  new BerthError('registry_unreachable', `delete ${ref}: registry ${registry} unreachable (${(err as { cause?: { code?: string } })?.cause?.code ?? (err instanceof Error ? err.message : String(err))})`, {
    retryable: true,
    details: { registry },
  });

/**
 * Deletes one manifest from its registry by digest (Docker Registry HTTP API v2:
 * `DELETE /v2/<repo>/manifests/<digest>`), which removes every tag naming it. The blobs stay until
 * the registry's own `garbage-collect` runs. A registry that does not answer is a retryable
 * `registry_unreachable`; one that refuses deletes (Debian's docker-registry without
 * `storage: delete: enabled: true` answers 405) or the credentials is a `registry_error`.
 * Basic credentials are sent as given; a token challenge (`WWW-Authenticate: Bearer`) is answered
 * with a token fetched with them.
 */
export async function deleteManifest(ref: string, opts: { auth?: RegistryAuth; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<ManifestDeleteOutcome> {
  const { registry, repo, digest } = parseManifestRef(ref);
  const signal = AbortSignal.any([...(opts.signal ? [opts.signal] : []), AbortSignal.timeout(opts.timeoutMs ?? DELETE_TIMEOUT_MS)]);
  const basic = opts.auth ? `Basic ${Buffer.from(`${opts.auth.username}:${opts.auth.password}`).toString('base64')}` : undefined;
  let lastErr: unknown;
  for (const scheme of schemes(registry)) {
    const url = `${scheme}://${registry}/v2/${repo}/manifests/${digest}`;
    let res: Response;
    try {
      res = await fetch(url, { method: 'DELETE', headers: basic ? { authorization: basic } : {}, signal });
      if (res.status === 401) {
        const bearer = await tokenFor(res.headers.get('www-authenticate'), basic, signal);
        if (bearer) res = await fetch(url, { method: 'DELETE', headers: { authorization: `Bearer ${bearer}` }, signal });
      }
    } catch (err) {
      opts.signal?.throwIfAborted();
      lastErr = err;
      continue;
    }
    await res.body?.cancel().catch(() => {});
    if (res.status === 202 || res.status === 200) return 'deleted';
    if (res.status === 404) return 'absent';
    const why =
      res.status === 405
        ? 'the registry refuses deletes (enable them: storage: delete: enabled: true in its config)'
        : res.status === 401 || res.status === 403
          ? `HTTP ${res.status}: not allowed (credentials for ${registry} in the Docker client configuration)`
          : `HTTP ${res.status}`;
    throw new BerthError('registry_error', `delete ${ref}: registry ${registry}: ${why}`, { retryable: res.status >= 500, details: { registry, status: String(res.status) } });
  }
  throw unreachable(registry, ref, lastErr);
}

/** A bearer token for a `WWW-Authenticate: Bearer realm=…,service=…,scope=…` challenge, fetched with the basic credentials. */
export async function tokenFor(challenge: string | null, basic: string | undefined, signal: AbortSignal): Promise<string | undefined> {
  if (!challenge || !/^bearer\s/i.test(challenge)) return undefined;
  const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!.toLowerCase(), m[2]!]));
  if (!params.realm) return undefined;
  const url = new URL(params.realm);
  if (params.service) url.searchParams.set('service', params.service);
  if (params.scope) url.searchParams.set('scope', params.scope);
  const res = await fetch(url, { headers: basic ? { authorization: basic } : {}, signal });
  if (!res.ok) return undefined;
  const body = (await res.json().catch(() => ({}))) as { token?: string; access_token?: string };
  return body.token ?? body.access_token;
}
