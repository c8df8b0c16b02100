import type { Logger } from 'pino';
import { satisfiesRange, type Environment } from '../../environment';
import { BerthError, isBerthError } from '../errors';
import type { Lease, SandboxHost } from '../sandbox';
import { checkSnapshotSecrets } from '../secrets';
import { timed, type Snapshotter, type SnapshotTransport } from '../snapshot';
import type { NewSnapshot, Store } from '../store';
import type { Clock } from '../support';
import { faultError, faultPoint, newId } from '../support';
import { sandboxSpecOf } from '../runtime/sandbox-spec';
import { KERNEL } from '../version';
import type { SandboxPointer } from './sandbox-doc';
import { leaseFromBase, pushAfterSnapshot } from './registry-steps';
import { assertStillOwner, supersedeEarlier } from './owner-guard';
import { canUploadAsLayer, dropUpload, uploadAsLayer, type UploadImage } from './upload-layer';
import { sandboxEntries, SweepLog, type SweepEntry } from './sweep-log';
import { countCutOffCpu } from './cut-off-cpu';
import type { Json } from '../model';
import type { PhaseContext } from '../kernel';

export interface RunSandboxDeps {
  store: Store;
  sandbox: SandboxHost;
  snapshots: Snapshotter;
  clock: Clock;
  logger: Logger;
  /**
   * Re-base the lease on a new snapshot once its layer is at least this big. Default 8 MiB: a
   * re-base (a new container) costs what copying some 17 MB more per commit costs on an idle
   * machine and far more under load, so a lower bound only moves cost onto the big step's snapshot
   * (bench/RESULTS.md, plan, session 4).
   */
  rebaseBytes?: number;
  /** Snapshots in an OCI registry (push after the snapshot, pull on restore); absent: this engine only. */
  transport?: SnapshotTransport;
}

/** A sandbox ready for the next step, and the pointer change that must commit with the step. */
export type Ensured = { kind: 'ok'; lease: Lease; pointer: Partial<SandboxPointer> } | { kind: 'reconcile'; reason: string };

/**
 * What this process verified of a run's sandbox before using it, kept until the step that used it
 * commits it as a `sandbox.verified` entry (a resumed run's evidence that it checked before continuing).
 */
export interface SandboxVerification {
  how: 'attached' | 'restored';
  kernel: string;
  kernelRange: string;
  envFingerprint: string;
  imageDigest: string;
  leaseId: string;
  /** The workspace digest the sandbox was found (or restored) to hold; null when a step was in flight (nothing to compare). */
  workspaceDigest: string | null;
  snapshotId: string | null;
  /** A restore's reason: the sandbox the run had and what verification found of it (removed from the engine, expired, released). */
  replaced?: { leaseId: string | null; reason: string; live?: boolean };
}

/** The sandbox is gone and the newest snapshot is older than the newest committed workspace. */
export type Behind = { kind: 'behind'; snapshotId: string; checkpoint: string };

type EnsureOptions = { inFlight: boolean; replay: 'safe' | 'never'; signal: AbortSignal };

/** A snapshot record as a run's phase hands it to its decision; the kernel adds run and task. */
export type NewSnapshotRecord = Omit<NewSnapshot, 'runId' | 'taskId'>;

/**
 * The sandbox side of plan and agent runs: leases, verification on resume, restore from snapshots and
 * snapshots at checkpoints. Holds the live lease of each run of this process; everything it
 * needs to rebuild that after a restart is in the run's sandbox pointer and the store.
 */
export class RunSandbox {
  private readonly live = new Map<string, Lease>();
  /** The ownership epoch under which this process holds each run's live lease. */
  private readonly epochs = new Map<string, number>();
  private readonly sessions = new Map<string, string>();
  private readonly verified = new Map<string, SandboxVerification>();
  /** Why the sandbox the run's pointer named could not be used (gone, removed, expired), until a restore records it. */
  private readonly replaced = new Map<string, NonNullable<SandboxVerification['replaced']>>();
  private readonly sweeps = new SweepLog();
  /** Entries taken by phases whose decisions did not commit, for the next phase of the run to record. */
  private readonly returned = new Map<string, Array<{ kind: string; body: Json }>>();

  constructor(private readonly d: RunSandboxDeps) {}

  /**
   * The entries the step (or tool) that used the run's sandbox commits about it, once: what this
   * process swept of the run's sandboxes, then what it verified (a restarted run's evidence).
   */
  takeEntries(runId: string): Array<{ kind: string; body: Json }> {
    return [...this.takeReturned(runId), ...sandboxEntries(this.sweeps.take(runId), this.takeVerification(runId))];
  }

  /** Only the sweeps, for a decision that used no sandbox after them (a park, an interrupt). */
  takeSweeps(runId: string): Array<{ kind: string; body: Json }> {
    return [...this.takeReturned(runId), ...sandboxEntries(this.sweeps.take(runId), undefined)];
  }

  /**
   * Gives back entries a phase took whose decision did not commit (it threw, was refused or
   * replaced): the sandbox stays held here, so no later phase verifies it again, and without them
   * the record would show a restarted step's output from a sandbox nothing verified.
   */
  returnEntries(runId: string, entries: Array<{ kind: string; body: Json }>): void {
    if (entries.length) this.returned.set(runId, [...entries, ...(this.returned.get(runId) ?? [])]);
  }

  /**
   * {@link takeEntries} for a phase: entries its decision does not commit come back (see
   * {@link returnEntries}).
   */
  takeEntriesFor(ctx: Pick<PhaseContext, 'onSettled'>, runId: string): Array<{ kind: string; body: Json }> {
    const entries = this.takeEntries(runId);
    if (entries.length) ctx.onSettled((committed) => committed || this.returnEntries(runId, entries));
    return entries;
  }

  private takeReturned(runId: string): Array<{ kind: string; body: Json }> {
    const r = this.returned.get(runId) ?? [];
    this.returned.delete(runId);
    return r;
  }

  /** The sweeps not yet taken (a reader that reports a resume). */
  pendingSweeps(runId: string): readonly SweepEntry[] {
    return this.sweeps.peek(runId);
  }

  /** What was verified of the run's sandbox since the last call (once: the step that used it records it). */
  takeVerification(runId: string): SandboxVerification | undefined {
    const v = this.verified.get(runId);
    this.verified.delete(runId);
    return v;
  }

  private noteVerified(runId: string, env: Environment, lease: Lease, how: SandboxVerification['how'], workspaceDigest: string | null, snapshotId: string | null): void {
    const spec = this.spec(env);
    const replaced = how === 'restored' ? this.replaced.get(runId) : undefined;
    this.replaced.delete(runId);
    this.verified.set(runId, { how, kernel: KERNEL.version, kernelRange: env.kernel.compatible, envFingerprint: spec.envFingerprint, imageDigest: spec.imageDigest, leaseId: lease.id, workspaceDigest, snapshotId, ...(replaced ? { replaced } : {}) });
  }

  spec(env: Environment) {
    return sandboxSpecOf(env);
  }

  async leaseFresh(runId: string, sessionId: string, env: Environment, signal: AbortSignal): Promise<Lease> {
    const epoch = await this.epochOf(sessionId);
    const lease = await timed(this.d.logger, 'lease', () => leaseFromBase(this.d, this.spec(env), env, { runId, sessionId, signal, epoch }));
    this.hold(runId, lease, epoch);
    return lease;
  }

  /**
   * A fresh sandbox leased from an image that already holds the uploaded workspace
   * (upload-layer.ts), with the `upload` snapshot that image is, its digest read from the
   * container itself; `undefined` when this upload cannot be a layer here (the caller uploads
   * into a fresh lease and snapshots that, as before).
   */
  async leaseUploaded(runId: string, sessionId: string, env: Environment, hostDir: string, signal: AbortSignal, onProgress?: (message: string) => void): Promise<{ lease: Lease; upload: UploadImage; record: NewSnapshotRecord; pointer: SandboxPointer } | undefined> {
    const not = canUploadAsLayer(env, this.d.snapshots, this.d.transport?.target(env.snapshot) !== undefined);
    if (not) {
      this.d.logger.debug({ runId, reason: not }, 'workspace uploaded into the fresh sandbox, not as a layer');
      return undefined;
    }
    const up = await uploadAsLayer({ snapshots: this.d.snapshots, store: this.d.store, logger: this.d.logger, hostId: this.d.sandbox.hostId, storeLabels: await this.d.sandbox.storeLabels() }, { env, hostDir, runId, sessionId, signal, onProgress });
    if (!up) return undefined;
    let lease: Lease | undefined;
    try {
      const epoch = await this.epochOf(sessionId);
      lease = await timed(this.d.logger, 'lease', () => this.d.sandbox.lease({ ...this.spec(env), imageDigest: up.imageId }, { sessionId, signal, runId, epoch }));
      // After the start, as a re-base marks it: the engine's own mount points (an --init binary's) are
      // in the new layer by then, and no command has run yet.
      const createdAt = Date.now();
      this.hold(runId, lease, epoch);
      await this.assertOwner(runId, sessionId);
      // The same test hooks as every snapshot's (crash tests count them): this is the run's first.
      faultError('snapshot.take');
      // Read from the container, as a restore reads its snapshot: what later verifications compare with.
      const state = await timed(this.d.logger, 'snapshot', () => this.d.snapshots.workspaceState(this.target(lease!, env), signal, { trust: false, imageId: up.imageId, createdAt }), { checkpoint: 'upload' });
      await this.d.store.putWorkspaceManifest(up.imageId, state.manifest as Json);
      faultPoint('after:snapshot.take');
      const record: NewSnapshotRecord = { id: up.snapshotId, leaseId: lease.id, imageId: up.imageId, workspaceDigest: state.digest, sizeBytes: up.layerBytes, checkpoint: 'upload', parentId: null };
      return { lease, upload: up, record, pointer: { leaseId: lease.id, snapshotId: up.snapshotId, workspaceDigest: state.digest } };
    } catch (err) {
      if (lease && this.live.get(runId) === lease) this.live.delete(runId);
      if (lease) this.d.snapshots.forget(lease.containerId);
      await dropUpload(this.d.snapshots, lease, up.snapshotId);
      throw err;
    }
  }

  /**
   * The `upload` snapshot of a fresh sandbox into which nothing was uploaded: the environment's image
   * itself (Snapshotter.ofFreshImage), read back from the container; `undefined` when it cannot be
   * (the caller takes the snapshot by an engine commit, as before). Under the same conditions as an
   * upload built as a layer: no registry takes the snapshots (the base image's push is the fresh
   * lease's), no secrets are declared (a snapshot's secret check reads the container's changes).
   * Call it right after {@link leaseFresh}: no command may have run in the container.
   */
  async freshImageSnapshot(runId: string, sessionId: string, env: Environment, lease: Lease, checkpoint: string, signal: AbortSignal): Promise<{ record: NewSnapshotRecord; pointer: SandboxPointer } | undefined> {
    if (this.d.transport?.target(env.snapshot) !== undefined || env.secrets.length > 0 || !lease.record.imageDigest?.startsWith('sha256:')) return undefined;
    const createdAt = Date.now();
    await this.assertOwner(runId, sessionId);
    faultError('snapshot.take');
    const id = newId('snap');
    const state = await timed(this.d.logger, 'snapshot', () => this.d.snapshots.ofFreshImage(this.target(lease, env), id, createdAt, signal), { checkpoint });
    if (!state) return undefined;
    faultPoint('after:snapshot.take');
    return { record: { id, leaseId: lease.id, imageId: state.imageId, workspaceDigest: state.digest, sizeBytes: 0, checkpoint, parentId: null }, pointer: { leaseId: lease.id, snapshotId: id, workspaceDigest: state.digest } };
  }

  /**
   * The sandbox a step may run in. Within one process the held lease is trusted. After a restart:
   * the kernel must be compatible; the container must exist, run, and match image and fingerprint;
   * and, with no step in flight, its workspace digest must equal the newest snapshot's. A gone or
   * expired sandbox is restored from that snapshot; anything else asks for reconciliation.
   */
  async ensure(runId: string, sessionId: string, env: Environment, ptr: SandboxPointer, o: EnsureOptions): Promise<Ensured> {
    const e = await this.ensureOrBehind(runId, sessionId, env, ptr, o);
    return e.kind === 'behind' ? this.restore(runId, sessionId, env, e.snapshotId, o.signal) : e;
  }

  /**
   * {@link ensure} for plan steps: a gone sandbox whose newest snapshot is older than the newest
   * committed workspace is reported as `behind` rather than restored, because restoring it would
   * drop the changes of the steps since.
   */
  async ensureOrBehind(runId: string, sessionId: string, env: Environment, ptr: SandboxPointer, o: EnsureOptions): Promise<Ensured | Behind> {
    const held = this.live.get(runId);
    if (held && held.id === ptr.leaseId && !held.lost && !held.isReleased && !o.inFlight) return { kind: 'ok', lease: held, pointer: {} };
    if (!satisfiesRange(KERNEL.version, env.kernel.compatible)) {
      return { kind: 'reconcile', reason: `kernel ${KERNEL.version} is not in the environment's compatible range ${env.kernel.compatible}` };
    }
    // A new owner (or this one after a restart) first removes what earlier owners left of the run
    // besides the pointer's sandbox: one a killed host restored or leased and never recorded.
    await this.supersede(runId, sessionId, ptr.leaseId);
    const record = ptr.leaseId ? await this.d.store.getLease(ptr.leaseId) : undefined;
    const expired = record ? record.releasedAt !== null || record.expiresAt < this.d.clock.now() : true;
    const v = record && !expired ? await this.d.sandbox.verify(record) : null;
    if (v && !v.ok && v.code === 'engine_unreachable') throw new BerthError('engine_unreachable', v.reason, { retryable: true, ids: { runId } });
    if (v && !v.ok && (v.code === 'image_mismatch' || v.code === 'fingerprint_mismatch')) return { kind: 'reconcile', reason: v.reason };
    if (record && v?.ok && !(o.inFlight && o.replay === 'safe')) {
      const lease = await this.adoptAttached(runId, sessionId, await this.d.sandbox.attach(this.spec(env), record));
      if (o.inFlight) {
        this.noteVerified(runId, env, lease, 'attached', null, ptr.snapshotId ?? null);
        return { kind: 'ok', lease, pointer: {} };
      }
      const state = await this.d.snapshots.workspaceState(this.target(lease, env), o.signal, { trust: false });
      if (ptr.workspaceDigest && state.digest !== ptr.workspaceDigest) {
        const paths = state.changed.slice(0, 5).join(', ');
        return { kind: 'reconcile', reason: `workspace digest mismatch: newest snapshot ${ptr.snapshotId} has ${ptr.workspaceDigest}, sandbox has ${state.digest} (changed: ${paths || 'unknown'})` };
      }
      this.noteVerified(runId, env, lease, 'attached', state.digest, ptr.snapshotId ?? null);
      return { kind: 'ok', lease, pointer: {} };
    }
    // Gone, stopped, expired, or a safe step was caught mid-run (its partial changes are discarded).
    const live = record !== undefined && v?.ok === true;
    const why = !record ? 'the run had no sandbox lease' : record.releasedAt !== null ? `lease ${record.id} was released` : expired ? `lease ${record.id} expired` : v && !v.ok ? v.reason : 'a safe step was caught mid-run: its partial changes are discarded';
    this.replaced.set(runId, { leaseId: record?.id ?? null, reason: why, ...(live ? { live: true } : {}) });
    if (record && record.releasedAt === null) await this.releaseRecord(record.id, env, runId);
    // The record accounts for it: a live sandbox (its command killed with it) was removed, or verification found it lost.
    if (record && live) this.sweeps.add(runId, { what: 'removed', leaseId: record.id, containerId: record.containerId, reason: 'in_flight_safe_step', epoch: record.epoch ?? null });
    // A released lease ended normally (a fork starts from its parent's); only one found expired or broken was lost.
    else if (record && record.releasedAt === null) {
      // A host-wide sweep (`berth gc`, a host's start) holds no run's ownership and writes only the
      // store's sweep log; the owner that finds the loss carries it into the run's record.
      const swept = (await this.d.store.listSweeps({ leaseId: record.id })).at(-1);
      this.sweeps.add(runId, { what: 'lost', leaseId: record.id, reason: why, ...(swept ? { sweptBy: { hostId: swept.hostId, reason: swept.reason, at: swept.at, containerId: swept.containerId } } : {}) });
    }
    if (!ptr.snapshotId) return { kind: 'reconcile', reason: `sandbox ${record ? `of lease ${record.id} ` : ''}is gone and no snapshot covers the newest committed sandbox change` };
    // Restoring is only a resume when the snapshot holds the newest committed workspace (under
    // `on-demand` later steps only advance the digest): otherwise the caller decides what to re-run.
    const snap = await this.d.store.getSnapshot(ptr.snapshotId);
    if (snap && ptr.workspaceDigest && snap.workspaceDigest !== ptr.workspaceDigest) return { kind: 'behind', snapshotId: snap.id, checkpoint: snap.checkpoint };
    // On another engine, the newest snapshot's async push may never have landed: the newest one
    // that reached the registry is where this engine can continue from (the caller re-runs the
    // safe steps after it, or asks the operator when a `never` step lies between).
    if (snap && snap.registryRef === null && this.d.transport && snap.prunedAt === null && !(await this.exists(snap.imageId))) {
      const pushed = (await this.d.store.listSnapshots({ runId, pruned: false, pushed: true })).filter((s) => s.commitSeq <= snap.commitSeq && s.id !== snap.id).at(-1);
      if (pushed) {
        this.d.logger.info({ runId, snapshotId: snap.id, pushed: pushed.id }, 'newest snapshot is neither on this engine nor in the registry; going back to the newest pushed one');
        return { kind: 'behind', snapshotId: pushed.id, checkpoint: pushed.checkpoint };
      }
    }
    return this.restore(runId, sessionId, env, ptr.snapshotId, o.signal);
  }

  /**
   * The sandbox a step that already ran (its effect is confirmed) left behind, for its snapshot.
   * It holds the step's changes, so it is never compared with the pointer from before the step;
   * it only has to be the same live container. `lost` when it is gone, stopped, expired or replaced.
   */
  async afterRun(runId: string, env: Environment, ptr: SandboxPointer): Promise<{ kind: 'ok'; lease: Lease } | { kind: 'lost'; reason: string }> {
    const held = this.live.get(runId);
    if (held && !held.lost && !held.isReleased) return { kind: 'ok', lease: held };
    const usable = await this.usable(ptr);
    if (!usable.ok) return { kind: 'lost', reason: usable.reason };
    await this.supersede(runId, usable.record.sessionId, usable.record.id);
    const lease = await this.adoptAttached(runId, usable.record.sessionId, await this.d.sandbox.attach(this.spec(env), usable.record));
    this.noteVerified(runId, env, lease, 'attached', null, ptr.snapshotId ?? null);
    return { kind: 'ok', lease };
  }

  /** Whether the pointer's sandbox can be used as it is (an engine that does not answer is retried, not judged). */
  async usable(ptr: SandboxPointer): Promise<{ ok: true; record: NonNullable<Awaited<ReturnType<Store['getLease']>>> } | { ok: false; reason: string }> {
    const record = ptr.leaseId ? await this.d.store.getLease(ptr.leaseId) : undefined;
    if (!record) return { ok: false, reason: 'the run has no sandbox lease' };
    if (record.releasedAt !== null) return { ok: false, reason: `lease ${record.id} was released` };
    if (record.expiresAt < this.d.clock.now()) return { ok: false, reason: `lease ${record.id} expired` };
    // An older owner's sandbox is usable once adopted: attaching stops every command it started there.
    const v = await this.d.sandbox.verify(record);
    if (!v.ok && v.code === 'engine_unreachable') throw new BerthError('engine_unreachable', v.reason, { retryable: true, ids: { leaseId: record.id } });
    return v.ok ? { ok: true, record } : { ok: false, reason: v.reason };
  }

  /** Snapshots of the run that can still be restored (record kept, image on the engine), newest first. */
  async restorable(runId: string): Promise<Array<{ id: string; checkpoint: string; workspaceDigest: string }>> {
    const out: Array<{ id: string; checkpoint: string; workspaceDigest: string }> = [];
    for (const s of (await this.d.store.listSnapshots({ runId })).reverse()) {
      if (s.prunedAt === null && ((this.d.transport && s.registryRef !== null) || (await this.exists(s.imageId)))) out.push({ id: s.id, checkpoint: s.checkpoint, workspaceDigest: s.workspaceDigest });
    }
    return out;
  }

  /** A new lease from a snapshot image, checked against the snapshot's workspace digest. */
  async restore(runId: string, sessionId: string, env: Environment, snapshotId: string, signal: AbortSignal): Promise<Ensured> {
    const snap = await this.d.store.getSnapshot(snapshotId);
    if (!snap) return { kind: 'reconcile', reason: `snapshot ${snapshotId} is not in the store` };
    if (snap.prunedAt !== null) return { kind: 'reconcile', reason: `snapshot image missing: ${snap.id} (${snap.imageId}) was pruned` };
    // A delta snapshot whose image is still in the store (a crash before the engine loaded it) is loaded first.
    const loaded = await this.d.snapshots.images.materialize(snap.imageId, signal).catch((err: unknown) => {
      if (isBerthError(err, 'image_missing')) return false;
      throw err;
    });
    if (!loaded) {
      // Another engine (or this one after its image went): pulled by digest and verified, or a reconciliation naming the registry.
      if (!this.d.transport || !snap.registryRef) return { kind: 'reconcile', reason: `snapshot image missing: ${snap.id} (${snap.imageId}) is no longer on the engine` };
      const fetched = await this.d.transport.fetch(snap, signal);
      if (fetched.kind === 'reconcile') return fetched;
    }
    let lease: Lease;
    const createdAt = Date.now();
    const epoch = await this.epochOf(sessionId);
    try {
      lease = await this.d.sandbox.lease({ ...this.spec(env), imageDigest: snap.imageId }, { sessionId, signal, runId, epoch });
    } catch (err) {
      if (isBerthError(err, 'image_missing')) return { kind: 'reconcile', reason: `snapshot image missing: ${snap.id} (${snap.imageId})` };
      throw err;
    }
    const state = await this.d.snapshots.workspaceState(this.target(lease, env), signal, { trust: false, imageId: snap.imageId, createdAt });
    if (state.digest !== snap.workspaceDigest) {
      this.d.snapshots.forget(lease.containerId);
      await lease.release();
      return { kind: 'reconcile', reason: `restored snapshot ${snap.id} has workspace digest ${state.digest}, recorded ${snap.workspaceDigest}` };
    }
    const old = this.live.get(runId);
    if (old && old.id !== lease.id && !old.isReleased) await old.release().catch(() => {});
    this.hold(runId, lease, epoch);
    this.noteVerified(runId, env, lease, 'restored', state.digest, snap.id);
    this.d.logger.info({ runId, snapshotId, leaseId: lease.id }, 'sandbox restored from snapshot');
    // Recovery work in the run's cost (an observation, like the other cost samples).
    await this.d.store.recordCost({ runId, at: Date.now(), key: lease.id, meters: { 'sandbox.restores': 1 } });
    return { kind: 'ok', lease, pointer: { leaseId: lease.id, snapshotId: snap.id, workspaceDigest: snap.workspaceDigest } };
  }

  /**
   * Snapshots the lease for `checkpoint`. When the new layer is big, the run moves to a fresh
   * container made from the snapshot image (an empty upper layer), so the next snapshot copies
   * only what the next step changes. It moves too when the snapshot was flattened, so that the
   * chain under the container stays short. The old container is released before the commit: its state
   * is in the snapshot image already.
   */
  async snapshot(runId: string, sessionId: string, env: Environment, lease: Lease, checkpoint: string, parentId: string | null, signal: AbortSignal) {
    const id = newId('snap');
    // A host that lost the run (frozen past its lease, then woken) never touches the sandbox the new owner uses.
    await this.assertOwner(runId, sessionId);
    // Test hooks: a failed snapshot (engine 5xx, scan error) and a kill with the image made but not recorded.
    faultError('snapshot.take');
    if (await lease.overDiskLimit()) throw new BerthError('disk_exceeded', `the sandbox is over its disk limit of ${env.resources.diskMb} MB; its state is not snapshotted`, { ids: { runId, leaseId: lease.id } });
    // Refuses (typed) a change holding a secret; an allowed one comes back as a label on the image.
    const held = await checkSnapshotSecrets(lease, env.secrets, { ids: { runId, leaseId: lease.id }, signal });
    // A `sync` push's layer starts up while the engine commits it (dropped when not used).
    const target = this.d.transport?.target(env.snapshot);
    const early = target && !Object.keys(held).length ? this.d.transport!.earlyLayer(target, signal) : undefined;
    let taken: Awaited<ReturnType<Snapshotter['take']>> | undefined;
    let record: NewSnapshotRecord;
    const origin = await this.d.sandbox.storeLabels();
    try {
      taken = await timed(this.d.logger, 'snapshot', () => this.d.snapshots.take(this.target(lease, env), {
        snapshotId: id,
        // The store's labels too: a delta image inherits only its parent's, and `berth gc --orphans` finds a deleted store's images by them.
        labels: { ...origin, 'berth.snapshot': id, 'berth.session': sessionId, 'berth.run': runId, 'berth.host': this.d.sandbox.hostId, ...held },
        signal,
        onCommit: early && ((upper) => early.start(upper)),
      }), { checkpoint });
      faultPoint('after:snapshot.take');
      record = { id, leaseId: lease.id, imageId: taken.imageId, workspaceDigest: taken.workspaceDigest, sizeBytes: taken.layerBytes, checkpoint, parentId, ...(await pushAfterSnapshot(this.d, { runId, env, snapshotId: id, imageId: taken.imageId, containerId: lease.containerId, held, early, signal })) };
    } catch (err) {
      // Taken but never to be recorded (a push refused, the phase stopped): no record will name its image.
      if (taken) await this.d.snapshots.discard(id);
      throw err;
    } finally {
      early?.dispose();
    }
    let current = lease;
    if (!taken.reused && (taken.flattened || taken.layerBytes >= (this.d.rebaseBytes ?? 8 << 20))) {
      current = await timed(this.d.logger, 'snapshot.rebase', async () => {
        await this.d.snapshots.images.materialize(taken.imageId, signal);
        const next = await this.d.sandbox.lease({ ...this.spec(env), imageDigest: taken.imageId }, { sessionId, signal, runId, epoch: this.epochs.get(runId) });
        this.d.snapshots.forget(lease.containerId);
        await lease.release();
        await this.d.snapshots.adopt(this.target(next, env), taken.manifest, signal);
        return next;
      }).catch(async (err: unknown) => {
        // The record of this snapshot will never commit (the phase retries with a new id).
        await this.d.snapshots.discard(id);
        throw err;
      });
      this.hold(runId, current, this.epochs.get(runId));
    }
    return { record, lease: current, pointer: { leaseId: current.id, snapshotId: id, workspaceDigest: taken.workspaceDigest } satisfies SandboxPointer };
  }

  /** The current workspace digest of the run's held lease. */
  async digest(lease: Lease, env: Environment, signal: AbortSignal): Promise<string> {
    return (await this.d.snapshots.workspaceState(this.target(lease, env), signal)).digest;
  }

  /** Whether the sandbox of a lease record can be used; one an older owner held is, once adopted ({@link attachRecord}). */
  verifyRecord(record: Parameters<SandboxHost['verify']>[0]) {
    return this.d.sandbox.verify(record);
  }

  async attachRecord(runId: string, record: Parameters<SandboxHost['verify']>[0], env: Environment): Promise<Lease> {
    const held = this.live.get(runId);
    if (held && held.id === record.id && !held.isReleased) return held;
    await this.supersede(runId, record.sessionId, record.id);
    return this.adoptAttached(runId, record.sessionId, await this.d.sandbox.attach(this.spec(env), record));
  }

  /**
   * Before a new owner decides anything about a step caught in flight: every other sandbox of the
   * run that earlier owners left goes, and the pointer's sandbox, when it is still there, is
   * attached (which stops every command an earlier host started in it, and waits for them to be
   * gone) and adopted. Says what became of the step's command, for the reason the run parks with.
   */
  async stopEarlier(runId: string, sessionId: string, env: Environment, ptr: SandboxPointer, tag: string): Promise<string> {
    await this.supersede(runId, sessionId, ptr.leaseId);
    const usable = await this.usable(ptr).catch((err: unknown) => ({ ok: false as const, reason: `it could not be checked: ${err instanceof Error ? err.message : String(err)}` }));
    if (!usable.ok) return `its sandbox is gone (${usable.reason}), and its command with it`;
    const held = this.live.get(runId);
    const lease = held && held.id === usable.record.id && !held.isReleased ? held : await this.adoptAttached(runId, sessionId, await this.d.sandbox.attach(this.spec(env), usable.record));
    // Attach already stopped every earlier command; asking again returns what it found, by tag.
    const found = (await lease.stopEarlierCommands({ signal: AbortSignal.timeout(30_000) })).commands.filter((c) => c.tag === tag);
    if (found.some((c) => c.state === 'killed')) return 'its command was still running and was stopped before this was decided';
    const ended = found.find((c) => c.state === 'ended');
    if (ended) return `its command had already ended${ended.exitCode === undefined ? '' : ` with exit code ${ended.exitCode}`} before this was decided`;
    return 'no command of it was running in its sandbox when this was decided';
  }

  /**
   * The kernel lost the session (taken, or its lease ran out): its sandboxes are no longer this
   * host's to trust. They are left as they are for the session's owner, who may be this host
   * again under a new epoch; then its first touch adopts them like any new owner's.
   */
  forgetSession(sessionId: string): void {
    for (const [runId, sid] of this.sessions) {
      if (sid !== sessionId) continue;
      this.live.delete(runId);
      this.epochs.delete(runId);
      this.sessions.delete(runId);
      this.returned.delete(runId);
    }
  }

  /** Stops trusting the held lease of a run; the next `ensure` verifies the sandbox from the records. */
  forget(runId: string): void {
    this.live.delete(runId);
  }

  held(runId: string): Lease | undefined {
    return this.live.get(runId);
  }

  /** Releases the run's sandbox (end of run). */
  /**
   * `release: 'at-run-end'` (a run completing): the lease is not released here but by the run-end
   * release that the completion commit starts (host/runtime/run-end-leases.ts), so the completion
   * is committed without waiting on the container's removal; this handle only stops renewing it.
   * A host killed in between leaves an ended run's lease, which the next host's start releases.
   */
  async finish(runId: string, o: { release?: 'now' | 'at-run-end' } = {}): Promise<void> {
    const lease = this.live.get(runId);
    this.live.delete(runId);
    this.returned.delete(runId);
    if (lease) this.d.snapshots.forget(lease.containerId);
    // The images need no container: the sandbox is removed while the engine loads the last layers
    // (the last step's load and the removal were each ~150 ms of a short run's end, one after the other).
    let release: Promise<void> = Promise.resolve();
    if (lease && !lease.isReleased) {
      if (o.release === 'at-run-end') lease.abandon();
      else release = lease.release();
    }
    const [loaded, released] = await Promise.allSettled([this.imagesOnEngine(runId), release]);
    if (released.status === 'rejected') throw released.reason;
    if (loaded.status === 'rejected') throw loaded.reason;
  }

  /**
   * The engine holds every snapshot image of the run before it is reported ended: this process's
   * background loads, and a layer a killed host left for a record it committed; and the async
   * pushes of the run's last checkpoints have landed.
   */
  private async imagesOnEngine(runId: string): Promise<void> {
    await this.d.snapshots.images.settle();
    // By the few pending layers, not by the run's snapshots (thousands at the end of a long run).
    for (const d of await this.d.store.listSnapshotDeltas()) {
      const s = await this.d.store.getSnapshot(d.snapshotId);
      if (!s || s.runId !== runId || s.prunedAt !== null || s.imageId !== d.imageId) continue;
      // Best effort: the run's end does not wait on an engine that cannot load it now; the layer
      // stays in the store for a restore or `berth gc` to load.
      await this.d.snapshots.images.materialize(s.imageId).catch((err: unknown) => this.d.logger.warn({ err, runId, snapshotId: s.id }, 'could not load a snapshot image into the engine; it stays in the store'));
    }
    await this.d.transport?.drain();
  }

  /** On the engine, or a delta image kept in the store until the engine loads it. */
  private exists(imageId: string): Promise<boolean> {
    return this.d.snapshots.images.exists(imageId);
  }

  private async releaseRecord(leaseId: string, env: Environment, runId: string): Promise<void> {
    const held = [...this.live.values()].find((l) => l.id === leaseId);
    if (held) return held.release();
    const record = await this.d.store.getLease(leaseId);
    if (!record) return;
    // Attach just to remove it; a container that is already gone only needs its record closed.
    await this.d.sandbox
      .attach(this.spec(env), record, { autoHeartbeat: false })
      .then(async (l) => {
        // The command it cut off (a step caught mid-run) is paid for before its container goes.
        await countCutOffCpu(this.d, runId, l).catch((err: unknown) => this.d.logger.warn({ err, runId }, 'could not count the CPU of a cut-off command'));
        await l.release();
      })
      // Not attachable (another process's networked lease, a gone container): released without a
      // Lease object, with its container and its network, not only the record (a record closed
      // alone left the network of a taken-over run's old sandbox behind for two minutes).
      .catch(() => this.d.sandbox.releaseLeases((r) => r.id === leaseId, 'released'))
      .catch(() => this.d.store.releaseLease(leaseId, this.d.clock.now()));
  }

  /**
   * The ownership epoch of the session's live owner (this host, when it drives the run): new
   * sandboxes carry it as a label and on their record, and an adopted one has its record raised to it.
   */
  private async epochOf(sessionId: string): Promise<number | undefined> {
    const owner = await this.d.store.getSessionOwner(sessionId);
    return owner && owner.stoppedAt === null ? owner.epoch : undefined;
  }

  private hold(runId: string, lease: Lease, epoch: number | undefined): void {
    this.live.set(runId, lease);
    this.sessions.set(runId, lease.record.sessionId);
    if (epoch === undefined) this.epochs.delete(runId);
    else this.epochs.set(runId, epoch);
  }

  /** An attached sandbox becomes this owner's: its record's epoch is raised, so neither sweeper nor verify takes it for a stale owner's. */
  private async adoptAttached(runId: string, sessionId: string, lease: Lease): Promise<Lease> {
    const epoch = await this.epochOf(sessionId);
    if (epoch !== undefined) await this.d.store.adoptLease(lease.id, epoch);
    this.hold(runId, lease, epoch);
    this.sweeps.adopted(runId, lease, epoch);
    // What earlier hosts ran here and never measured (their command cut off by the kill) is paid for.
    await countCutOffCpu(this.d, runId, lease).catch((err: unknown) => this.d.logger.warn({ err, runId }, 'could not count the CPU of a cut-off command'));
    return lease;
  }

  private async supersede(runId: string, sessionId: string, keep: string | null): Promise<void> {
    for (const r of await supersedeEarlier(this.d, runId, sessionId, keep)) this.sweeps.add(runId, { what: 'removed', leaseId: r.leaseId, containerId: r.containerId, reason: 'stale_epoch', epoch: r.epoch });
  }

  private assertOwner(runId: string, sessionId: string): Promise<void> {
    return assertStillOwner(this.d.store, runId, sessionId, this.epochs.get(runId));
  }

  private target(lease: Lease, env: Environment) {
    return {
      containerId: lease.containerId,
      imageId: lease.record.imageDigest,
      workspacePath: env.workspace.path,
      ...(env.resources.diskMb !== undefined ? { diskLimitBytes: env.resources.diskMb * 1024 * 1024 } : {}),
      exec: (cmd: string[], opts: { stdin?: string; signal?: AbortSignal; user?: string }) => lease.exec(cmd, { ...opts, timeoutMs: 0, outputCapBytes: 64 << 20 }),
    };
  }
}
