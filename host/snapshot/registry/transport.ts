import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, isBerthError } from '../../errors';
import type { Snapshot } from '../../model';
import type { Store } from '../../store';
import { faultPoint } from '../../support';
import { timed } from '../timing';
import { directPush, learnManifest, RAW_LAYER_TYPE, takeSession, type ImageSource } from './direct-push';
import { EarlyLayer } from './early-layer';
import type { RegistryAuth } from './manifest-delete';
import { pushWaitMs, pushWithRetry } from './push-retry';
import { RegistryHttp } from './registry-http';

/** The registry calls the sandbox adapter provides (`registryEngine(docker)` in host/sandbox). */
export interface RegistryCalls {
  push(imageId: string, repo: string, tag: string, signal?: AbortSignal): Promise<{ ref: string; digest: string }>;
  pull(ref: string, expectedImageId: string, opts?: { tag?: { repo: string; tag: string }; signal?: AbortSignal }): Promise<'present' | 'pulled'>;
  /** A local image's exact config and layers, when this machine can read the engine's stores (a push then skips the engine). */
  localImage?(imageId: string, maxLayerBytes: number): Promise<ImageSource | undefined>;
  /** The Docker client's credentials for a registry host. */
  auth?(host: string): RegistryAuth | undefined;
}

/**
 * Layers up to this size are sent by this host, uncompressed (a step's snapshot: the engine's push
 * costs ~200-400 ms whatever the size); bigger ones go through the engine, which compresses them.
 */
export const DIRECT_LAYER_MAX_BYTES = 8 << 20;

/** Where and how a run's snapshots travel, from its manifest and the host setting. */
export interface PushTarget {
  /** `host[:port][/path]`; the snapshot repository is `<registry>/berth-snapshot`. */
  registry: string;
  policy: 'sync' | 'async';
}

/** The outcome of making a recorded snapshot present on this engine. */
export type Fetched = { kind: 'ok'; pulled: boolean } | { kind: 'reconcile'; reason: string };

export const SNAPSHOT_REPOSITORY = 'berth-snapshot';
/** Base images travel under their image id: `<registry>/berth-base:<hex of the id>`. */
export const BASE_REPOSITORY = 'berth-base';
// A record commits with its phase right after the snapshot; one that has not after this long never will
// (its phase retried with a new id), and the queue moves on rather than hold later pushes.
const ASYNC_RECORD_WAIT_MS = 60_000;

/**
 * Snapshot images in an OCI registry: the step after the snapshot record (never inside the
 * snapshotter). `sync` pushes before the record commits, so the record carries the manifest
 * reference; `async` pushes after the record committed and then marks it pushed. Pulls go by
 * digest and are verified against the recorded image id.
 */
export class SnapshotTransport {
  /** Async pushes in order, one at a time: when a push starts, every earlier one has landed or failed. */
  private queue: Promise<void> = Promise.resolve();
  /** Base image pushes of this process, per registry: landed, or in flight (callers share it). */
  private readonly basePushed = new Map<string, Promise<void>>();

  /** `direct: false` sends every push through the engine (tests of that path). */
  constructor(private readonly d: { registry: RegistryCalls; store: Store; logger: Logger; hostRegistry?: string; pollMs?: number; pushWaitMs?: number; direct?: boolean }) {}

  private waitMs(): number {
    return this.d.pushWaitMs ?? pushWaitMs();
  }

  /** The run's push target, or undefined when no registry is configured (manifest first, then the host's `BERTH_REGISTRY`). */
  target(snapshot: { registry?: string; push?: 'sync' | 'async' }): PushTarget | undefined {
    const registry = snapshot.registry ?? this.d.hostRegistry;
    return registry ? { registry: registry.replace(/\/+$/, ''), policy: snapshot.push ?? 'sync' } : undefined;
  }

  private repo(t: PushTarget): string {
    return `${t.registry}/${SNAPSHOT_REPOSITORY}`;
  }

  /**
   * Pushes now (the `sync` policy); the caller commits the returned reference with the record. A
   * registry that does not answer is waited for with backoff, for at most the push wait
   * (`BERTH_PUSH_WAIT_MS`), then `registry_push_waiting` (retryable): the image is still here.
   */
  async push(t: PushTarget, snapshotId: string, imageId: string, signal?: AbortSignal, o: { materialize?: (imageId: string, signal?: AbortSignal) => Promise<unknown>; early?: EarlyLayer } = {}): Promise<{ registryRef: string; pushedAt: number }> {
    const repo = this.repo(t);
    let attempt = 0;
    const { ref } = await pushWithRetry(
      `push of snapshot ${snapshotId} to ${t.registry}`,
      () =>
        timed(this.d.logger, 'snapshot.push', async () => {
          const direct = await this.pushDirect(repo, snapshotId, imageId, attempt++ > 0, signal, o.early);
          if (direct) return direct;
          // A pending delta image is in the store only: the engine pushes what it holds.
          await o.materialize?.(imageId, signal);
          const pushed = await this.d.registry.push(imageId, repo, snapshotId, signal);
          this.learn(repo, pushed.digest, imageId);
          return pushed;
        }),
      { logger: this.d.logger, waitMs: this.waitMs(), signal, ids: { snapshotId } },
    );
    return { registryRef: ref, pushedAt: Date.now() };
  }

  /** One client per registry and credentials: its scheme and bearer token carry over from push to push. */
  private readonly clients = new Map<string, RegistryHttp>();

  private http(repo: string): { http: RegistryHttp; path: string } {
    const host = repo.split('/')[0]!;
    const auth = this.d.registry.auth?.(host);
    const key = `${host} ${auth ? createHash('sha256').update(`${auth.username}\0${auth.password}`).digest('hex') : ''}`;
    let http = this.clients.get(key);
    if (!http) {
      if (this.clients.size >= 64) this.clients.clear();
      this.clients.set(key, (http = new RegistryHttp(host, auth)));
    }
    return { http, path: repo.slice(host.length + 1) };
  }

  /** The image as a push needs it: a pending delta from the store (over its parent's source), else the engine's own stores. */
  private async source(imageId: string): Promise<ImageSource | undefined> {
    const delta = await this.d.store.getSnapshotDelta(imageId);
    if (delta) {
      const parent = await this.source(delta.parentImageId);
      const diffIds = (JSON.parse(delta.config.toString('utf8')) as { rootfs: { diff_ids: string[] } }).rootfs.diff_ids;
      if (!parent || parent.layers.length !== diffIds.length - 1) return undefined;
      return { config: delta.config, layers: [...parent.layers, { diffId: diffIds.at(-1)!, size: delta.layer.length, tar: async () => delta.layer }] };
    }
    return this.d.registry.localImage?.(imageId, DIRECT_LAYER_MAX_BYTES);
  }

  /**
   * The push straight to the registry (`direct-push.ts`), when this machine can read the image:
   * a step's snapshot then costs the new layer's upload and a manifest, not the engine's push of
   * every layer. `undefined`: push through the engine.
   */
  private async pushDirect(repo: string, tag: string, imageId: string, retry: boolean, signal?: AbortSignal, early?: EarlyLayer): Promise<{ ref: string; digest: string } | undefined> {
    if (this.d.direct === false || !this.d.registry.localImage) return undefined;
    const src = await timed(this.d.logger, 'snapshot.push_source', () => this.source(imageId));
    if (!src) return undefined;
    const { http, path } = this.http(repo);
    const got = await timed(this.d.logger, 'snapshot.push_direct', () => directPush(http, path, tag, src, { retry, early, signal }));
    if (!got) this.d.logger.debug({ imageId, repo }, 'direct push not possible; pushing through the engine');
    return got && { ref: `${repo}@${got.digest}`, digest: got.digest };
  }

  /**
   * An upload of a `sync` snapshot's layer that starts while the engine commits it (`early-layer.ts`),
   * for {@link push} to use; `undefined` when pushes do not go straight to the registry here, or
   * this process does not know the registry's scheme yet (a streamed body is sent on a known scheme
   * only: a loopback registry's is known at once, another's after this process's first request).
   */
  earlyLayer(t: PushTarget, signal?: AbortSignal): EarlyLayer | undefined {
    if (t.policy !== 'sync' || this.d.direct === false || !this.d.registry.localImage) return undefined;
    const { http, path } = this.http(this.repo(t));
    if (!http.settled) return undefined;
    return new EarlyLayer(http, path, { maxBytes: DIRECT_LAYER_MAX_BYTES, mediaType: RAW_LAYER_TYPE, session: (s) => takeSession(http, path, s), logger: this.d.logger, signal });
  }

  /** Learns, off the step's path, which blobs an engine push left in the registry, so the next push reuses them. */
  private learn(repo: string, reference: string, imageId: string): void {
    if (this.d.direct === false || !this.d.registry.localImage) return;
    const { http, path } = this.http(repo);
    void (async () => {
      const src = await this.d.registry.localImage!(imageId, 0);
      await learnManifest(http, path, reference, src?.config);
    })().catch((err: unknown) => this.d.logger.debug({ err, repo }, 'could not read back a pushed manifest'));
  }

  /**
   * Queues the push of a snapshot whose record is about to commit (the `async` policy): the push
   * waits for the record (it commits with the step, after this call returns), so a record is only
   * ever marked pushed once it exists, and a host killed before the push lands leaves it unpushed.
   */
  pushAfterCommit(t: PushTarget, snapshotId: string, imageId: string, materialize?: (imageId: string, signal?: AbortSignal) => Promise<unknown>): void {
    this.queue = this.queue.then(async () => {
      try {
        if (!(await this.committed(snapshotId))) {
          this.d.logger.warn({ snapshotId }, 'async push skipped: the snapshot record never committed');
          return;
        }
        // Test hook: a host killed after the checkpoint commit, before its push landed.
        faultPoint('snapshot.push.async');
        const { registryRef, pushedAt } = await this.push(t, snapshotId, imageId, undefined, { materialize });
        await this.d.store.markSnapshotPushed(snapshotId, registryRef, pushedAt);
      } catch (err) {
        // The checkpoint stands; only its portability is missing. A resume elsewhere goes back to the newest pushed one.
        this.d.logger.warn({ err, snapshotId, registry: t.registry }, 'async snapshot push failed');
      }
    });
  }

  private async committed(snapshotId: string): Promise<boolean> {
    const end = Date.now() + ASYNC_RECORD_WAIT_MS;
    while (Date.now() < end) {
      if (await this.d.store.getSnapshot(snapshotId)) return true;
      await new Promise((r) => setTimeout(r, this.d.pollMs ?? 50));
    }
    return false;
  }

  /**
   * Pushes a run's base image (once per process and registry), so that an engine that never built
   * it can lease a fresh sandbox for the run, e.g. a resume before its first snapshot committed.
   */
  async pushBase(t: PushTarget, imageId: string, signal?: AbortSignal): Promise<void> {
    const key = `${t.registry} ${imageId}`;
    let p = this.basePushed.get(key);
    if (!p) {
      p = pushWithRetry(
        `push of base image ${imageId.slice(7, 19)} to ${t.registry}`,
        () => timed(this.d.logger, 'snapshot.push_base', () => this.d.registry.push(imageId, `${t.registry}/${BASE_REPOSITORY}`, imageId.replace(/^sha256:/, ''), signal)),
        { logger: this.d.logger, waitMs: this.waitMs(), signal, ids: { imageId } },
      ).then((pushed) => this.learn(`${t.registry}/${BASE_REPOSITORY}`, pushed.digest, imageId));
      this.basePushed.set(key, p);
      // A failed push is forgotten: the next run that leases the image pushes it again.
      p.catch(() => this.basePushed.delete(key));
    }
    await p;
  }

  /**
   * Pulls a base image this engine lacks from the registry and checks that its id (the digest of
   * its config, which pins every layer) is the pinned one: verified, not assumed. False when the
   * registry does not have it; an unreachable registry throws a retryable error.
   */
  async fetchBase(t: PushTarget, imageId: string, signal?: AbortSignal): Promise<boolean> {
    try {
      await timed(this.d.logger, 'snapshot.pull_base', () => this.d.registry.pull(`${t.registry}/${BASE_REPOSITORY}:${imageId.replace(/^sha256:/, '')}`, imageId, { signal }));
      this.d.logger.info({ imageId, registry: t.registry }, 'base image pulled from the registry');
      return true;
    } catch (err) {
      if (isBerthError(err, 'registry_missing')) return false;
      throw err;
    }
  }

  /** Waits for every queued async push (a run's end, a clean exit). */
  drain(): Promise<void> {
    return this.queue;
  }

  /**
   * Makes a recorded, pushed snapshot's image present on this engine: pulled by digest and checked
   * against the recorded image id. A missing manifest or blob, or content that does not verify, is
   * a reconciliation naming the snapshot and the registry; an unreachable registry throws a
   * retryable error (the resume tries again, never starts fresh).
   */
  async fetch(snap: Snapshot, signal?: AbortSignal): Promise<Fetched> {
    if (!snap.registryRef) return { kind: 'reconcile', reason: `snapshot image missing: ${snap.id} (${snap.imageId}) is not on this engine and was never pushed to a registry` };
    const registry = snap.registryRef.split('/')[0]!;
    try {
      const got = await timed(this.d.logger, 'snapshot.pull', () => this.d.registry.pull(snap.registryRef!, snap.imageId, { tag: { repo: SNAPSHOT_REPOSITORY, tag: snap.id }, signal }));
      if (got === 'pulled') this.d.logger.info({ snapshotId: snap.id, registry }, 'snapshot pulled from the registry');
      return { kind: 'ok', pulled: got === 'pulled' };
    } catch (err) {
      if (!isBerthError(err)) throw err;
      if (err.code === 'registry_unreachable') throw new BerthError(err.code, `snapshot ${snap.id}: ${err.message}`, { retryable: true, ids: { snapshotId: snap.id }, details: { registry }, cause: err });
      if (err.code === 'registry_missing' || err.code === 'registry_digest_mismatch' || err.code === 'registry_error') {
        return { kind: 'reconcile', reason: `snapshot ${snap.id} cannot be restored from registry ${registry} (${snap.registryRef}): ${err.message}` };
      }
      throw err;
    }
  }
}
