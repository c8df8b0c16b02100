import type { Logger } from 'pino';
import type { Environment } from '../../environment';
import { BerthError, isBerthError } from '../errors';
import type { Lease, SandboxHost, SandboxSpec } from '../sandbox';
import type { EarlyLayer, Snapshotter, SnapshotTransport } from '../snapshot';
import type { NewSnapshot } from '../store';

type Deps = { sandbox: SandboxHost; snapshots: Snapshotter; transport?: SnapshotTransport; logger: Logger };

/**
 * A fresh lease from the base image. With a registry the base image travels too: pushed when a
 * run first leases it (a sync policy waits for it), and pulled, its id verified, on an engine
 * that lacks it (a resume on another host before the first snapshot committed).
 */
export async function leaseFromBase(d: Deps, spec: SandboxSpec, env: Environment, o: { runId: string; sessionId: string; signal: AbortSignal; epoch?: number }): Promise<Lease> {
  const target = d.transport?.target(env.snapshot);
  const opts = { sessionId: o.sessionId, signal: o.signal, runId: o.runId, ...(o.epoch !== undefined ? { epoch: o.epoch } : {}) };
  let lease: Lease;
  try {
    lease = await d.sandbox.lease(spec, opts);
  } catch (err) {
    if (!target || !isBerthError(err, 'image_missing') || !spec.imageDigest) throw err;
    if (!(await d.transport!.fetchBase(target, spec.imageDigest, o.signal))) throw err;
    lease = await d.sandbox.lease(spec, opts);
  }
  if (target && spec.imageDigest) {
    const push = d.transport!.pushBase(target, spec.imageDigest, o.signal);
    if (target.policy === 'sync') {
      await push.catch(async (err: unknown) => {
        await lease.release().catch(() => {});
        throw err;
      });
    } else push.catch((err: unknown) => d.logger.warn({ err, runId: o.runId }, 'base image push failed'));
  }
  return lease;
}

/**
 * The registry step after a snapshot (its own step: the snapshotter never pushes). `sync`: pushed
 * now, and the record commits with the manifest reference; a registry that does not answer is
 * waited for (with backoff, up to the push wait), and then the snapshot is given up and the step
 * waits in `retry_wait` (`registry_push_waiting`): no checkpoint commits that is not restorable
 * elsewhere, and the run never fails for an outage. `async`: queued behind the commit, retried with
 * backoff there.
 * A snapshot that may hold secret material (labelled by the secret check) is never pushed.
 */
export async function pushAfterSnapshot(
  d: Deps,
  o: { runId: string; env: Environment; snapshotId: string; imageId: string; containerId: string; held: Record<string, string>; early?: EarlyLayer; signal: AbortSignal },
): Promise<Pick<NewSnapshot, 'registryRef' | 'pushedAt'>> {
  const target = d.transport?.target(o.env.snapshot);
  if (!target || !d.transport) return {};
  if (Object.keys(o.held).length) {
    d.logger.warn({ runId: o.runId, snapshotId: o.snapshotId }, 'snapshot may hold secret material (allowInWorkspace): not pushed to the registry');
    return {};
  }
  // A delta snapshot's image may still be in the store only. `sync`: the transport sends it from
  // there (or, when it pushes through the engine, has it loaded first). `async`: loaded now, as the
  // record commits unpushed: a resume elsewhere must find it neither on an engine nor in the store's
  // pending layers to go back to the newest pushed one.
  const materialize = (imageId: string, signal?: AbortSignal) => d.snapshots.images.materialize(imageId, signal);
  if (target.policy === 'async') {
    await materialize(o.imageId, o.signal);
    d.transport.pushAfterCommit(target, o.snapshotId, o.imageId, materialize);
    return {};
  }
  try {
    return await d.transport.push(target, o.snapshotId, o.imageId, o.signal, { materialize, early: o.early });
  } catch (err) {
    // The record of this snapshot will never commit (the phase retries with a new id). What the
    // snapshotter knew of the container names this image: forgotten with it, or the retry would
    // reuse an image that is gone.
    d.snapshots.forget(o.containerId);
    await d.snapshots.discard(o.snapshotId);
    if (isBerthError(err)) throw new BerthError(err.code, `snapshot of run ${o.runId}: ${err.message}`, { retryable: err.retryable, ids: { runId: o.runId, snapshotId: o.snapshotId }, details: err.details, cause: err });
    throw err;
  }
}
