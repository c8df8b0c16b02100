import { createHash } from 'node:crypto';
import type { EarlyLayer } from './early-layer';
import type { RegistryHttp } from './registry-http';

/** An image as a push needs it: its exact config bytes and its layers, each rebuildable as the tar its diff id names. */
export interface ImageSource {
  config: Buffer;
  /** `chunks`, when given, yields the same bytes as `tar` as they are read (and throws when they cannot be). */
  layers: Array<{ diffId: string; size: number; tar(): Promise<Buffer | undefined>; chunks?(): AsyncIterable<Buffer> }>;
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export const MANIFEST_TYPE = 'application/vnd.docker.distribution.manifest.v2+json';
const CONFIG_TYPE = 'application/vnd.docker.container.image.v1+json';
/** Layers this host sends are uncompressed: the blob's digest is the layer's diff id, so any host can ask for it by that. */
export const RAW_LAYER_TYPE = 'application/vnd.docker.image.rootfs.diff.tar';

/**
 * What this process knows a registry holds, per layer diff id: the blob (gzip as the engine pushed
 * it, or raw as this host did) and the repositories it is linked in. Learnt from every manifest
 * pushed or read here. A registry that lost a blob (its storage wiped, its garbage collection)
 * refuses the manifest naming it; that registry's entries are then forgotten.
 */
const known = new Map<string, Map<string, { d: Descriptor; repos: Set<string> }>>();

function knownOf(registry: string) {
  let m = known.get(registry);
  if (!m) known.set(registry, (m = new Map()));
  return m;
}

export function forgetRegistry(registry: string): void {
  known.delete(registry);
}

/** Records that `repo` in the registry holds the blobs of a manifest whose layers pair, in order, with `diffIds`. */
export function learnLayers(registry: string, repo: string, diffIds: string[], layers: Descriptor[]): void {
  if (diffIds.length !== layers.length) return;
  const m = knownOf(registry);
  for (const [i, diffId] of diffIds.entries()) {
    const e = m.get(diffId);
    if (e && e.d.digest === layers[i]!.digest) e.repos.add(repo);
    else m.set(diffId, { d: layers[i]!, repos: new Set([repo]) });
  }
}

const diffIdsOf = (config: Buffer) => (JSON.parse(config.toString('utf8')) as { rootfs?: { diff_ids?: string[] } }).rootfs?.diff_ids ?? [];

/** Reads a manifest this registry holds (by digest or tag) and learns its layers; `config` saves reading the config blob. */
export async function learnManifest(http: RegistryHttp, repo: string, reference: string, config?: Buffer, signal?: AbortSignal): Promise<void> {
  const res = await http.request('GET', `/v2/${repo}/manifests/${reference}`, { headers: { accept: MANIFEST_TYPE }, signal });
  if (res.status !== 200) return void (await res.body?.cancel().catch(() => {}));
  const m = (await res.json()) as { mediaType?: string; config?: Descriptor; layers?: Descriptor[] };
  if (!m.layers || !m.config) return;
  let cfg = config;
  if (!cfg) {
    const c = await http.request('GET', `/v2/${repo}/blobs/${m.config.digest}`, { signal });
    if (c.status !== 200) return void (await c.body?.cancel().catch(() => {}));
    cfg = Buffer.from(await c.arrayBuffer());
  }
  learnLayers(http.registry, repo, diffIdsOf(cfg), m.layers);
}

async function drop(res: Response) {
  await res.body?.cancel().catch(() => {});
}

/**
 * Upload sessions opened ahead, per registry and repository: opening one is a round trip of its
 * own (10-100 ms on a loaded machine), so a push takes one that is ready and the next is opened
 * off the step's path. A session the registry no longer knows (restarted, expired) fails its PUT,
 * and the upload then opens a fresh one.
 */
const sessions = new Map<string, string[]>();
const SESSIONS_AHEAD = 2;

async function openSession(http: RegistryHttp, repo: string, signal?: AbortSignal): Promise<string | undefined> {
  const start = await http.request('POST', `/v2/${repo}/blobs/uploads/`, { signal });
  await drop(start);
  const loc = start.headers.get('location');
  return start.status === 202 && loc ? loc : undefined;
}

/** How many upload sessions are open ahead for `repo` (what a push can start on without a round trip). */
export function readySessions(http: RegistryHttp, repo: string): number {
  return sessions.get(`${http.registry} ${repo}`)?.length ?? 0;
}

/** A session for an upload off the step's path: one opened ahead, else a new one (there is time: the engine is committing). */
export async function takeSession(http: RegistryHttp, repo: string, signal?: AbortSignal): Promise<string | undefined> {
  return sessions.get(`${http.registry} ${repo}`)?.shift() ?? (await openSession(http, repo, signal));
}

/** Opens in flight per pool key: a refill counts them, so that pushes ending together do not open sessions the pool will not keep. */
const opening = new Map<string, number>();

function refill(http: RegistryHttp, repo: string): void {
  const key = `${http.registry} ${repo}`;
  const pool = sessions.get(key) ?? [];
  sessions.set(key, pool);
  for (let i = pool.length + (opening.get(key) ?? 0); i < SESSIONS_AHEAD; i++) {
    opening.set(key, (opening.get(key) ?? 0) + 1);
    void openSession(http, repo)
      .then(
        (loc) => loc && pool.length < SESSIONS_AHEAD && pool.push(loc),
        () => {},
      )
      .finally(() => opening.set(key, (opening.get(key) ?? 1) - 1));
  }
}

async function putBlob(http: RegistryHttp, loc: string, digest: string, body: Buffer, signal?: AbortSignal): Promise<boolean> {
  const url = `${loc}${loc.includes('?') ? '&' : '?'}digest=${encodeURIComponent(digest)}`;
  const put = await http.request('PUT', url, { headers: { 'content-type': 'application/octet-stream' }, body, signal });
  await drop(put);
  return put.status === 201;
}

/**
 * A blob upload in one request when a session is ready (the registry checks the digest), else two.
 * The pool is refilled by the caller once its push is done: sessions opened while its blobs are
 * still being sent compete with them for the registry (seen: a step's push ~10 ms slower under load).
 */
async function upload(http: RegistryHttp, repo: string, digest: string, body: Buffer, signal?: AbortSignal): Promise<boolean> {
  const ready = sessions.get(`${http.registry} ${repo}`)?.shift();
  if (ready && (await putBlob(http, ready, digest, body, signal))) return true;
  const loc = await openSession(http, repo, signal);
  return loc !== undefined && (await putBlob(http, loc, digest, body, signal));
}

/**
 * The layer sent as it is read, in one request on a session opened ahead: the tar's reading and
 * the registry's receiving overlap instead of following each other. The registry checks the
 * digest (the diff id) against what it received. The bytes' count, or `undefined` when there was
 * no ready session, the source stopped part way, or the registry refused: the caller then reads
 * the tar whole and sends it as before (a stream cannot be sent twice).
 */
async function uploadStreaming(http: RegistryHttp, repo: string, digest: string, chunks: () => AsyncIterable<Buffer>, signal?: AbortSignal): Promise<number | undefined> {
  if (!http.settled) return undefined;
  const ready = sessions.get(`${http.registry} ${repo}`)?.shift();
  if (!ready) return undefined;
  let sent = 0;
  let sourceFailed = false;
  const it = chunks()[Symbol.asyncIterator]();
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      try {
        const n = await it.next();
        if (n.done) return c.close();
        sent += n.value.length;
        c.enqueue(n.value);
      } catch (err) {
        sourceFailed = true;
        c.error(err);
      }
    },
    async cancel() {
      await it.return?.();
    },
  });
  const url = `${ready}${ready.includes('?') ? '&' : '?'}digest=${encodeURIComponent(digest)}`;
  try {
    const put = await http.request('PUT', url, { headers: { 'content-type': 'application/octet-stream' }, body, signal });
    await drop(put);
    return put.status === 201 ? sent : undefined;
  } catch (err) {
    // The reading stopped (the request ends with it), not the registry: the whole-tar path decides.
    if (sourceFailed && !signal?.aborted) return undefined;
    throw err;
  }
}

/** Links a blob another repository of this registry holds into `repo` (a cross-repository mount). */
async function mount(http: RegistryHttp, repo: string, digest: string, from: string, signal?: AbortSignal): Promise<boolean> {
  const res = await http.request('POST', `/v2/${repo}/blobs/uploads/?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(from)}`, { signal });
  await drop(res);
  if (res.status === 201) return true;
  // 202: the registry opened an upload instead; it is abandoned (it expires on the registry).
  const loc = res.headers.get('location');
  if (res.status === 202 && loc) await http.request('DELETE', loc, { signal }).then(drop, () => {});
  return false;
}

async function blobExists(http: RegistryHttp, repo: string, digest: string, signal?: AbortSignal): Promise<number | undefined> {
  const res = await http.request('HEAD', `/v2/${repo}/blobs/${digest}`, { signal });
  await drop(res);
  return res.status === 200 ? Number(res.headers.get('content-length') ?? 0) : undefined;
}

/**
 * The layer's blob in `repo`: already known there, mounted from another repository, found by its
 * diff id, or sent now. The image's top layer is the snapshot's own, new to any registry: it is
 * sent without asking first, unless an earlier attempt of this push may have sent it already.
 */
async function layerBlob(http: RegistryHttp, repo: string, layer: ImageSource['layers'][number], o: { ask: boolean; early?: EarlyLayer; signal?: AbortSignal }): Promise<Descriptor | undefined> {
  const e = knownOf(http.registry).get(layer.diffId);
  if (e?.repos.has(repo)) return e.d;
  if (e) {
    for (const from of e.repos) {
      if (await mount(http, repo, e.d.digest, from, o.signal)) {
        e.repos.add(repo);
        return e.d;
      }
    }
  }
  const early = await o.early?.take(layer.diffId);
  if (early) return early;
  const raw: Descriptor = { mediaType: RAW_LAYER_TYPE, digest: layer.diffId, size: 0 };
  const have = o.ask ? await blobExists(http, repo, layer.diffId, o.signal) : undefined;
  if (have !== undefined) return { ...raw, size: have };
  const streamed = layer.chunks ? await uploadStreaming(http, repo, layer.diffId, () => layer.chunks!(), o.signal) : undefined;
  if (streamed !== undefined) return { ...raw, size: streamed };
  const tar = await layer.tar();
  if (!tar || !(await upload(http, repo, layer.diffId, tar, o.signal))) return undefined;
  return { ...raw, size: tar.length };
}

/**
 * Pushes an image to `repo:tag` by talking to the registry directly rather than through the engine:
 * only the blobs the registry lacks are sent (known ones are reused, other repositories' mounted,
 * the rest asked for by diff id first), then the config and the manifest. `undefined` when it
 * cannot be done here (a layer that cannot be rebuilt, a blob the registry lost): the caller pushes
 * through the engine instead. An unreachable registry throws a retryable error.
 */
export async function directPush(http: RegistryHttp, repo: string, tag: string, src: ImageSource, o: { retry?: boolean; early?: EarlyLayer; signal?: AbortSignal } = {}): Promise<{ digest: string } | undefined> {
  const { signal } = o;
  const configDigest = `sha256:${createHash('sha256').update(src.config).digest('hex')}`;
  const top = src.layers.length - 1;
  // The config is new with every snapshot: sent with the layers, no existence check first.
  const [config, ...layers] = await Promise.all([
    upload(http, repo, configDigest, src.config, signal),
    ...src.layers.map((l, i) => layerBlob(http, repo, l, { ask: i < top || o.retry === true, early: i === top ? o.early : undefined, signal })),
  ]);
  if (!config || layers.some((l) => l === undefined)) {
    refill(http, repo);
    return undefined;
  }
  const manifest = Buffer.from(
    JSON.stringify({ schemaVersion: 2, mediaType: MANIFEST_TYPE, config: { mediaType: CONFIG_TYPE, size: src.config.length, digest: configDigest }, layers }),
  );
  const res = await http.request('PUT', `/v2/${repo}/manifests/${tag}`, { headers: { 'content-type': MANIFEST_TYPE }, body: manifest, signal }).finally(() => refill(http, repo));
  await drop(res);
  if (res.status !== 201) {
    // Most likely a blob this process thought the registry had is gone: ask again next time.
    forgetRegistry(http.registry);
    return undefined;
  }
  learnLayers(
    http.registry,
    repo,
    src.layers.map((l) => l.diffId),
    layers as Descriptor[],
  );
  return { digest: `sha256:${createHash('sha256').update(manifest).digest('hex')}` };
}
