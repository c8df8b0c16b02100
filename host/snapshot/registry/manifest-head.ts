import { schemes, tokenFor, type RegistryAuth } from './manifest-delete';

/**
 * Whether the registry holds `repo:reference` now (`HEAD /v2/<repo>/manifests/<reference>`): true
 * on 200, false on 404; undefined when it cannot be told (unreachable, refused, another status).
 * A worker asks before it claims a run whose base image its engine lacks.
 */
export async function manifestPresent(registry: string, repo: string, reference: string, opts: { auth?: RegistryAuth; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<boolean | undefined> {
  const signal = AbortSignal.any([...(opts.signal ? [opts.signal] : []), AbortSignal.timeout(opts.timeoutMs ?? 5000)]);
  const basic = opts.auth ? `Basic ${Buffer.from(`${opts.auth.username}:${opts.auth.password}`).toString('base64')}` : undefined;
  const accept = 'application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json';
  for (const scheme of schemes(registry)) {
    const url = `${scheme}://${registry}/v2/${repo}/manifests/${reference}`;
    try {
      let res = await fetch(url, { method: 'HEAD', headers: { accept, ...(basic ? { authorization: basic } : {}) }, signal });
      if (res.status === 401) {
        const bearer = await tokenFor(res.headers.get('www-authenticate'), basic, signal);
        if (bearer) res = await fetch(url, { method: 'HEAD', headers: { accept, authorization: `Bearer ${bearer}` }, signal });
      }
      if (res.status === 200) return true;
      if (res.status === 404) return false;
      return undefined;
    } catch {
      // next scheme, or unknown
    }
  }
  return undefined;
}
