import { markStore } from './store-marker';
import { hostname, type networkInterfaces } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { BerthError } from '../errors';
import type { Clock } from '../support/clock';
import { faultPoint } from '../support/faults';
import { newId } from '../support/ids';
import { containerCreateOptions } from './container-options';
import type { DiskGuardOptions } from './disk-guard';
import { engineError, isNotFound } from './engine-errors';
import { EngineEvents, type ExitWatch } from './engine-events';
import { assertImagePresent, resolveImageDigest } from './image';
import { containerLabels, labelledLocation, storeLabels } from './labels';
import { releaseLeases } from './lease-release';
import { Lease } from './lease';
import type { LeaseRecord, LeaseRecords, SweepRecord } from './lease-records';
import { SandboxEgress, type EgressAttachment, type EgressPort } from './sandbox-egress';
import { checkSpec, type SandboxSpec } from './sandbox-spec';
import { sweepStore } from './sweeper';
import type { EgressSweep } from './sandbox-network';
import { verifyLease, type VerifyResult } from './verify';

/** What a {@link SandboxHost} is built from; the CLI wires the real ones. */
export interface SandboxHostOptions {
  docker: Dockerode;
  records: LeaseRecords;
  clock: Clock;
  logger: Logger;
  /** Stable id of this host; every container carries it so the sweeper finds them after a crash. */
  hostId: string;
  /** Where the store is (`Store.location`), labelled on every container and snapshot image for `berth gc --orphans`. */
  storeLocation?: string;
  /** Bytes of output kept per stream and exec (head and tail halves). Default 64 KiB. */
  outputCapBytes?: number;
  disk?: DiskGuardOptions;
  /** Needed for `allowlist` sandboxes: starts the host's egress proxy (open mode needs none). */
  egress?: EgressPort;
  /**
   * This machine's interfaces, read at each open-mode lease to know its LANs. Default: the live
   * list. Tests pin it, because another test's engine bridge may come and go during a lease.
   */
  interfaces?: () => ReturnType<typeof networkInterfaces>;
}

/** Options of one {@link SandboxHost.lease} call. */
export interface LeaseOptions {
  sessionId: string;
  signal?: AbortSignal;
  /** Heartbeat every `spec.lease.heartbeatS` on an unref'd timer. Default true. */
  autoHeartbeat?: boolean;
  /** The run the sandbox serves; egress attempts are recorded against it. */
  runId?: string;
  /** The run owner's epoch (issue 15), carried as the `berth.epoch` label. */
  epoch?: number;
}

/** A container created by this host but not yet given to a lease. */
export interface ProvisionedContainer {
  container: Dockerode.Container;
  id: string;
  createdAt: number;
  /** Set when the container has an egress network to tear down with it. */
  egressLeaseId?: string;
  /**
   * A pool container's end as the engine's event stream saw it: false once it died, true while
   * the stream watched it throughout, undefined when only the engine can say (see EngineEvents.watchExit).
   */
  exit?: ExitWatch;
}

/**
 * The Docker side of Berth: leases sandboxes, checks them on resume, and sweeps what dead
 * processes left behind. The only module that talks to the engine.
 */
export class SandboxHost {
  readonly hostId: string;
  /** This process's incarnation; pool containers carry it so a later one knows they are orphans. */
  readonly instanceId: string;
  private readonly events: EngineEvents;
  /** Containers of this instance whose removal failed; the sweeper may take them. */
  private readonly abandoned = new Set<string>();
  private readonly egress: SandboxEgress;
  private storeIdP: Promise<string> | undefined;

  constructor(private readonly opts: SandboxHostOptions) {
    this.hostId = opts.hostId;
    this.instanceId = newId('inst');
    this.events = new EngineEvents(opts.docker, opts.hostId, opts.logger);
    this.egress = new SandboxEgress({ docker: opts.docker, hostId: opts.hostId, logger: opts.logger, port: opts.egress, interfaces: opts.interfaces });
  }

  /**
   * Records the lease as an intent (with the run it serves), then creates and starts a container
   * from the spec's pinned image id and names it on the record. A host killed anywhere in between
   * leaves a record a later host finds (the container carries `berth.lease`), so the sandbox is
   * released with its run instead of living until its TTL. Refuses an unpinned digest
   * (`image_not_pinned`) and an image not on the engine (`image_missing`). Anything failing after
   * create removes the container again and releases the record.
   */
  async lease(spec: SandboxSpec, options: LeaseOptions): Promise<Lease> {
    checkSpec(spec);
    options.signal?.throwIfAborted();
    const leaseId = newId('lease');
    const intent = this.leaseRecord(spec, leaseId, '', options);
    await this.opts.records.insertLease(intent);
    faultPoint('sandbox:lease-intent');
    const dropIntent = () => this.opts.records.releaseLease(leaseId, this.opts.clock.now()).catch((err: unknown) => this.opts.logger.warn({ err, leaseId }, 'could not release a lease intent'));
    let provisioned: ProvisionedContainer;
    try {
      [provisioned] = await Promise.all([this.provision(spec, { sessionId: options.sessionId, leaseId, runId: options.runId, epoch: options.epoch }, options.signal), this.events.ensureConnected()]);
    } catch (err) {
      await dropIntent();
      throw err;
    }
    try {
      options.signal?.throwIfAborted();
      // False when the intent was released meanwhile (its run ended, gc): the lease must not start.
      if (!(await this.opts.records.setLeaseContainer(leaseId, provisioned.id))) {
        throw new BerthError('lease_released', `lease ${leaseId} was released while its container was being created`, { ids: { leaseId } });
      }
      const lease = this.makeLease(spec, provisioned.container, { ...intent, containerId: provisioned.id }, { pidsMax: 0, oomKill: 0 }, options.autoHeartbeat ?? true, true);
      faultPoint('sandbox:leased');
      return lease;
    } catch (err) {
      await this.discard(provisioned);
      await dropIntent();
      throw err;
    }
  }

  /**
   * Creates and starts a container for `spec`. Without a session it is a warm-pool container.
   * @internal used by {@link createWarmPool}.
   */
  async provision(spec: SandboxSpec, who: { sessionId?: string; leaseId?: string; runId?: string; epoch?: number }, signal?: AbortSignal): Promise<ProvisionedContainer> {
    checkSpec(spec);
    await assertImagePresent(this.opts.docker, spec.imageDigest, spec.imageRef, spec.workspace.path);
    const storeId = await this.storeId();
    const egress = await this.openEgress(spec, { ...who, storeId });
    const createdAt = this.opts.clock.now();
    const pool = who.sessionId === undefined;
    // A pool container is watched from before it starts, so a lease can trust it runs without an inspect.
    if (pool) await this.events.ensureConnected();
    const labels = containerLabels({ hostId: this.hostId, storeId, instanceId: this.instanceId, envFingerprint: spec.envFingerprint, createdAt, sessionId: who.sessionId, runId: who.runId, leaseId: who.leaseId, pool, epoch: who.epoch, origin: await this.storeLabels() });
    const name = pool ? `berth-pool-${newId('c').slice(2)}` : `berth-${who.leaseId}`;
    let container: Dockerode.Container;
    try {
      container = await this.opts.docker.createContainer(containerCreateOptions(spec, labels, name, egress));
    } catch (err) {
      if (who.leaseId && egress) await this.egress.close(who.leaseId);
      throw engineError('create sandbox container', err, { sessionId: who.sessionId, leaseId: who.leaseId });
    }
    const provisioned: ProvisionedContainer = { container, id: container.id, createdAt, ...(egress ? { egressLeaseId: who.leaseId } : {}), ...(pool ? { exit: this.events.watchExit(container.id) } : {}) };
    try {
      signal?.throwIfAborted();
      await container.start();
      // The proxy serves only this container's address, known once it runs.
      if (egress && spec.network.mode !== 'none') await this.egress.bind(who.leaseId!, container.id, spec.network);
    } catch (err) {
      await this.discard(provisioned);
      throw engineError('start sandbox container', err, { containerId: container.id, sessionId: who.sessionId, leaseId: who.leaseId });
    }
    return provisioned;
  }

  /**
   * Records a lease on a provisioned container and hands it out.
   * @internal used by {@link createWarmPool}.
   */
  async adopt(spec: SandboxSpec, p: ProvisionedContainer, leaseId: string, options: LeaseOptions): Promise<Lease> {
    const record = this.leaseRecord(spec, leaseId, p.id, options);
    // Synced with the next commit rather than on its own: a container that loses its record to a
    // machine crash is a dead instance's pool container, which the sweeper removes, and every
    // record that names the lease (a run's or session's commit) is written after it, so no durable
    // record can point at a lease whose row was lost (see LeaseRecords.insertLease).
    await this.opts.records.insertLease(record, { sync: 'with-next-commit' });
    p.exit?.stop();
    return this.makeLease(spec, p.container, record, { pidsMax: 0, oomKill: 0 }, options.autoHeartbeat ?? true);
  }

  /**
   * Removes a provisioned container that never became a lease.
   * @internal
   */
  async discard(p: ProvisionedContainer): Promise<void> {
    p.exit?.stop();
    try {
      await p.container.remove({ force: true, v: true });
      if (p.egressLeaseId) await this.egress.close(p.egressLeaseId);
    } catch (err) {
      if (isNotFound(err)) {
        if (p.egressLeaseId) await this.egress.close(p.egressLeaseId);
        return;
      }
      this.abandoned.add(p.id);
      this.opts.logger.warn({ err, containerId: p.id }, 'could not remove container; the sweeper will');
    }
  }

  /**
   * Takes up an existing lease again (after a restart): verifies the container, then returns a
   * Lease for it. Throws with the verify code when it cannot be resumed.
   */
  async attach(spec: SandboxSpec, record: LeaseRecord, options: { autoHeartbeat?: boolean } = {}): Promise<Lease> {
    const v = await this.verify(record);
    if (!v.ok) throw new BerthError(v.code, v.reason, { retryable: v.code === 'engine_unreachable', ids: { leaseId: record.id, containerId: record.containerId } });
    if (record.releasedAt !== null) throw new BerthError('lease_released', `lease ${record.id} is released`, { ids: { leaseId: record.id } });
    await this.events.ensureConnected();
    if (spec.network.mode !== 'none') await this.egress.resume(record.id, spec.network, record.containerId);
    const container = this.opts.docker.getContainer(record.containerId);
    const lease = this.makeLease(spec, container, record, { pidsMax: 0, oomKill: 0 }, options.autoHeartbeat ?? true);
    // Commands an earlier host started may still run (and write): stop them before anyone
    // measures, verifies or snapshots the workspace. The report stays on the lease for the owner.
    const earlier = await lease.stopEarlier({ clean: true }).catch((err: unknown) => {
      lease.abandon();
      throw engineError('stop commands an earlier host started', err, { leaseId: record.id, containerId: record.containerId });
    });
    if (earlier.outcome === 'unstoppable') {
      lease.abandon();
      throw new BerthError('sandbox_unstoppable', `processes an earlier host started in sandbox ${record.containerId} survived every kill; remove the container`, {
        ids: { leaseId: record.id, containerId: record.containerId },
        details: { commands: earlier.commands },
      });
    }
    lease.attachedEarlier = earlier;
    const killed = earlier.commands.filter((c) => c.state === 'killed');
    if (earlier.killedProcesses > 0) this.opts.logger.warn({ leaseId: record.id, killedProcesses: earlier.killedProcesses, commands: killed.map((c) => c.tag ?? c.execId) }, 'stopped what an earlier host left running in the sandbox');
    // The layer may already hold data; start the disk bound from a measurement, not from zero.
    await lease.diskUsageBytes();
    return lease;
  }

  private makeLease(spec: SandboxSpec, container: Dockerode.Container, record: LeaseRecord, counters: { pidsMax: number; oomKill: number }, autoHeartbeat: boolean, armedNow = false): Lease {
    return new Lease({
      docker: this.opts.docker,
      container,
      record,
      spec,
      records: this.opts.records,
      events: this.events,
      clock: this.opts.clock,
      logger: this.opts.logger,
      outputCapBytes: this.opts.outputCapBytes ?? 64 * 1024,
      disk: this.opts.disk,
      autoHeartbeat,
      armedNow,
      counters,
      ...(spec.network.mode !== 'none' ? { onReleased: () => this.egress.close(record.id) } : {}),
    });
  }

  /** Network, INPUT rules and (allowlist) proxy of a networked sandbox, all in place before its container exists. */
  private async openEgress(spec: SandboxSpec, who: { leaseId?: string; runId?: string; sessionId?: string; storeId: string }): Promise<EgressAttachment | undefined> {
    if (spec.network.mode === 'none') return undefined;
    if (!who.leaseId) throw new BerthError('invalid_spec', `${spec.network.mode} sandboxes are not pooled: each needs its own network, made for its lease`);
    return this.egress.open(who.leaseId, { runId: who.runId ?? null, sessionId: who.sessionId ?? null, storeId: who.storeId, origin: await this.storeLabels() }, spec.network);
  }

  /** The id of the store this host records its leases in; labels and sweeps are scoped to it. */
  /** `berth.store`, `berth.store.location`, `berth.machine` and `berth.pid` of what this host makes (containers, snapshot images). */
  async storeLabels(): Promise<Record<string, string>> {
    return storeLabels(await this.storeId(), labelledLocation(this.opts.storeLocation, resolvePath), hostname(), process.pid);
  }

  /** Leaves this store's marker on the engine (see markStore): a store that imported a run may have nothing else here. */
  async markStore(): Promise<void> {
    await markStore(this.opts.docker, await this.storeLabels());
  }

  storeId(): Promise<string> {
    this.storeIdP ??= this.opts.records.storeId().catch((err: unknown) => {
      this.storeIdP = undefined;
      throw err;
    });
    return this.storeIdP;
  }

  /**
   * Releases the unreleased leases of this store that `select` picks (the runtime picks those of
   * runs in a final state); see lease-release.ts.
   */
  async releaseLeases(select: (record: LeaseRecord) => boolean | Promise<boolean>, reason: SweepRecord['reason'] = 'run_ended'): Promise<SweepRecord[]> {
    const ctx = { ...this.base(), storeId: await this.storeId(), forget: (id: string) => this.events.forget(id), closeEgress: (leaseId: string) => this.egress.close(leaseId) };
    return releaseLeases(ctx, select, reason);
  }

  /** Whether the sandbox named by a lease record can be resumed as is. */
  /** Whether this engine holds the image (by id): a worker claims only runs it can start. */
  async hasImage(imageId: string): Promise<boolean> {
    try {
      await this.opts.docker.getImage(imageId).inspect();
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw engineError(`inspect image ${imageId}`, err);
    }
  }

  /**
   * What this engine holds of a lease's container now (`berth show` tells a released lease whose
   * container still runs from one that is gone): `absent` also for a container on another engine.
   */
  async containerState(record: LeaseRecord): Promise<'running' | 'stopped' | 'absent' | 'unknown'> {
    if (!record.containerId) return 'absent';
    try {
      const info = await this.opts.docker.getContainer(record.containerId).inspect();
      return info.State.Running ? 'running' : 'stopped';
    } catch (err) {
      return isNotFound(err) ? 'absent' : 'unknown';
    }
  }

  verify(record: LeaseRecord, opts: { minEpoch?: number } = {}): Promise<VerifyResult> {
    return verifyLease(this.opts.docker, record, opts);
  }

  /**
   * Removes this store's released, expired and unknown containers; see sweeper.ts for the rules.
   * `egressMinAgeMs` (default two minutes) keeps younger networks, whose lease may be being written.
   */
  /** `egress`, when given, receives what each egress sweep removed and kept (`berth gc` reports it). */
  async sweep(options: { signal?: AbortSignal; egressMinAgeMs?: number; egress?: EgressSweep[] } = {}): Promise<SweepRecord[]> {
    return sweepStore({ ...this.base(), storeId: await this.storeId(), instanceId: this.instanceId, isAbandoned: (id) => this.abandoned.has(id)}, options);
  }

  /** A lease record as of now; `containerId` is '' for an intent whose container does not exist yet. */
  private leaseRecord(spec: SandboxSpec, leaseId: string, containerId: string, options: LeaseOptions): LeaseRecord {
    const now = this.opts.clock.now();
    return {
      id: leaseId,
      sessionId: options.sessionId,
      hostId: this.hostId,
      containerId,
      imageDigest: spec.imageDigest,
      envFingerprint: spec.envFingerprint,
      createdAt: now,
      expiresAt: now + spec.lease.ttlS * 1000,
      releasedAt: null,
      runId: options.runId ?? null,
      epoch: options.epoch ?? null,
    };
  }

  private base() {
    return { docker: this.opts.docker, records: this.opts.records, clock: this.opts.clock, logger: this.opts.logger, hostId: this.hostId };
  }

  /** The image id of a local image reference (`berth env lock`); `image_missing` when absent. */
  resolveImageDigest(ref: string): Promise<string> {
    return resolveImageDigest(this.opts.docker, ref);
  }

  /** Stops the engine event subscription. Leases stay as they are; release them first if meant. */
  async close(): Promise<void> {
    this.events.close();
    await this.egress.detachAll();
  }
}

/** Builds a {@link SandboxHost}; the CLI is the one place that calls this with the real engine. */
export function createSandboxHost(opts: SandboxHostOptions): SandboxHost {
  return new SandboxHost(opts);
}
