import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { BerthError } from '../errors';
import { isNotFound } from './engine-errors';
import { localImage } from './layer-source';
import { sharedPush } from './push-lock';

/** An image pushed to a registry: its manifest reference, `host[:port]/repo@sha256:…`. */
export interface PushedImage {
  ref: string;
  /** The manifest digest the registry acknowledged. */
  digest: string;
}

type Progress = { error?: string; errorDetail?: { message?: string }; aux?: { Digest?: string } };

/** The registry host of a repository (`127.0.0.1:5000/berth-snapshot` → `127.0.0.1:5000`). */
export const registryHost = (repo: string) => repo.split('/')[0]!;

/**
 * Credentials for a registry from the Docker client's configuration (`$DOCKER_CONFIG/config.json`
 * or `~/.docker/config.json`, `auths[host].auth`), read at each push or pull and handed to the
 * engine only: they never reach the store, an error or a log line. None for a registry without auth.
 */
export function registryAuth(host: string): { username: string; password: string; serveraddress: string } | undefined {
  try {
    const file = join(process.env.DOCKER_CONFIG ?? join(homedir(), '.docker'), 'config.json');
    const auth = (JSON.parse(readFileSync(file, 'utf8')) as { auths?: Record<string, { auth?: string }> }).auths?.[host]?.auth;
    if (!auth) return undefined;
    const plain = Buffer.from(auth, 'base64').toString('utf8');
    const i = plain.indexOf(':');
    return { username: plain.slice(0, i), password: plain.slice(i + 1), serveraddress: host };
  } catch {
    return undefined;
  }
}

/**
 * A registry failure as a typed error naming the registry (never its credentials): unreachable is
 * retryable (the same pull may work later); a missing manifest or blob, and a digest that does not
 * verify, are not: the caller turns them into a reconciliation.
 */
export function registryError(action: string, registry: string, message: string, extra: Record<string, string> = {}): BerthError {
  const m = message.toLowerCase();
  const ids = {};
  const details = { registry, ...extra };
  if (/connection refused|no such host|i\/o timeout|dial tcp|connection reset|eof|service unavailable|timeout exceeded|econnrefused/.test(m)) {
    return new BerthError('registry_unreachable', `${action}: registry ${registry} unreachable (${message.trim()})`, { retryable: true, ids, details });
  }
  if (/digest|verification|checksum|does not match/.test(m)) {
    return new BerthError('registry_digest_mismatch', `${action}: content from registry ${registry} does not verify (${message.trim()})`, { ids, details });
  }
  if (/unknown|not found|404|does not exist/.test(m)) {
    return new BerthError('registry_missing', `${action}: registry ${registry} lacks part of it (${message.trim()})`, { ids, details });
  }
  return new BerthError('registry_error', `${action}: registry ${registry}: ${message.trim()}`, { ids, details });
}

/** Follows a push or pull progress stream to its end; the first error event fails it. */
function follow(docker: Dockerode, stream: NodeJS.ReadableStream, signal?: AbortSignal): Promise<Progress[]> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      (stream as unknown as { destroy?: (e?: Error) => void }).destroy?.();
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    docker.modem.followProgress(stream, (err: Error | null, events: Progress[]) => {
      signal?.removeEventListener('abort', onAbort);
      if (err) return reject(err);
      const bad = events.find((e) => e.error || e.errorDetail?.message);
      return bad ? reject(new Error(bad.errorDetail?.message ?? bad.error)) : resolve(events);
    });
  });
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err)) + ((err as { json?: { message?: string } })?.json?.message ? ` ${(err as { json: { message: string } }).json.message}` : '');

/** Which engine a client talks to (its socket or address): pushes through one engine share a lock. */
function engineKey(docker: Dockerode): string {
  const m = docker.modem as unknown as { socketPath?: string; host?: string; port?: number | string };
  return m.socketPath ?? `${m.host ?? 'localhost'}:${m.port ?? ''}`;
}

/**
 * Pushes a local image as `repo:tag` (repo includes the registry host) and returns its manifest
 * reference. The engine sends only the layers the registry lacks (it checks each blob first), so
 * a snapshot that adds 1 MB on top of pushed history costs about 1 MB. The registry-qualified tag
 * is removed afterwards: locally the image keeps its own names, and the record names it by digest.
 * Pushes of one `repo:tag` through one engine run one at a time on this machine (callers in one
 * process share the push in flight), since the tag is the engine's and one push's clean-up would
 * pull it from under another. Every failure of a push is retryable: a push cut off half way (the
 * registry went down, a blob upload the restarted registry no longer knows) is sent again, and the
 * engine then sends only what the registry still lacks.
 */
export async function pushImage(docker: Dockerode, imageId: string, repo: string, tag: string, signal?: AbortSignal): Promise<PushedImage> {
  signal?.throwIfAborted();
  const registry = registryHost(repo);
  try {
    return await sharedPush(engineKey(docker), `${repo}:${tag}`, () => pushOnce(docker, imageId, repo, tag, signal), signal);
  } catch (err) {
    if (signal?.aborted) throw err;
    const e = err instanceof BerthError ? err : registryError(`push image ${imageId.slice(7, 19)} to ${repo}`, registry, messageOf(err), { imageId });
    return Promise.reject(e.retryable ? e : new BerthError(e.code === 'registry_missing' ? 'registry_push_incomplete' : e.code, e.message, { retryable: true, ids: e.ids, details: e.details, cause: e }));
  }
}

async function pushOnce(docker: Dockerode, imageId: string, repo: string, tag: string, signal?: AbortSignal): Promise<PushedImage> {
  try {
    await docker.getImage(imageId).tag({ repo, tag }).catch((err: unknown) => {
      // Nothing to send: pushing again cannot help.
      if (isNotFound(err)) throw new BerthError('image_missing', `push image ${imageId.slice(7, 19)}: it is not on this engine`, { details: { imageId } });
      throw err;
    });
    const stream = (await docker.getImage(`${repo}:${tag}`).push({ tag, authconfig: registryAuth(registryHost(repo)), abortSignal: signal } as object)) as NodeJS.ReadableStream;
    const events = await follow(docker, stream, signal);
    const digest = events.map((e) => e.aux?.Digest).find(Boolean);
    if (!digest) throw new Error('the registry acknowledged no manifest digest');
    return { ref: `${repo}@${digest}`, digest };
  } finally {
    await docker.getImage(`${repo}:${tag}`).remove({ noprune: true }).catch(() => {});
  }
}

/**
 * Makes `ref` (`repo@sha256:…`) present on this engine as the image `expectedImageId`: pulled by
 * digest when absent (the engine verifies every blob against its digest on arrival), then the
 * local image id, which is the digest of its config, is compared with the one recorded. A mismatch
 * removes what was pulled. `tag`: a local name for the pulled image (`repo:tag`), so that gc sees it.
 */
export async function pullImage(docker: Dockerode, ref: string, expectedImageId: string, opts: { tag?: { repo: string; tag: string }; signal?: AbortSignal } = {}): Promise<'present' | 'pulled'> {
  const registry = registryHost(ref);
  const have = await docker.getImage(expectedImageId).inspect().then(() => true, (err: unknown) => (isNotFound(err) ? false : Promise.reject(err)));
  let outcome: 'present' | 'pulled' = 'present';
  if (!have) {
    try {
      const stream = (await docker.pull(ref, { authconfig: registryAuth(registry), abortSignal: opts.signal } as object)) as NodeJS.ReadableStream;
      await follow(docker, stream, opts.signal);
    } catch (err) {
      if (err instanceof BerthError || opts.signal?.aborted) throw err;
      throw registryError(`pull ${ref}`, registry, messageOf(err), { imageId: expectedImageId });
    }
    const got = ((await docker.getImage(ref).inspect()) as { Id: string }).Id;
    if (got !== expectedImageId) {
      await docker.getImage(got).remove({ force: true }).catch(() => {});
      throw new BerthError('registry_digest_mismatch', `pull ${ref}: registry ${registry} gave image ${got}, recorded ${expectedImageId}`, { details: { registry, imageId: expectedImageId } });
    }
    outcome = 'pulled';
  }
  if (opts.tag) await docker.getImage(expectedImageId).tag(opts.tag);
  return outcome;
}

/** Registry calls bound to one Docker client (so callers never import dockerode). */
export function registryEngine(docker: Dockerode) {
  return {
    push: (imageId: string, repo: string, tag: string, signal?: AbortSignal) => pushImage(docker, imageId, repo, tag, signal),
    pull: (ref: string, expectedImageId: string, opts?: { tag?: { repo: string; tag: string }; signal?: AbortSignal }) => pullImage(docker, ref, expectedImageId, opts),
    /** A local image's config and layers read from this machine's engine stores, for a push straight to the registry. */
    localImage: (imageId: string, maxLayerBytes: number) => localImage(docker, imageId, { maxLayerBytes }),
    /** The Docker client's credentials for a registry host (handed to this process's own registry requests only). */
    auth: (host: string) => registryAuth(host),
    /** Labels of a local image (a snapshot that may hold secret material is never pushed). */
    labels: async (imageId: string) => (((await docker.getImage(imageId).inspect()) as { Config?: { Labels?: Record<string, string> | null } }).Config?.Labels ?? {}) as Record<string, string>,
  };
}
export type RegistryEngine = ReturnType<typeof registryEngine>;
