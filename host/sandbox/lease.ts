import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import type { Readable } from 'node:stream';
import { BerthError, type ErrorIds } from '../errors';
import type { Clock } from '../support/clock';
import type { Owner, SkippedEntry } from './archive-pack';
import { DiskGuard, type DiskGuardOptions } from './disk-guard';
import { isNotFound } from './engine-errors';
import type { EngineEvents } from './engine-events';
import { DiskWatch } from './disk-watch';
import { stopEarlierCommands, type EarlierCommand, type EarlierCommands } from './earlier-commands';
import { ExecActivity } from './exec-activity';
import { runExec, type ExecHost } from './exec-run';
import { readCpuUsec } from './exec-usage';
import type { ExecOptions, ExecResult } from './exec-types';
import * as files from './file-ops';
import * as artifactFiles from './artifact-files';
import { changesOf, type Change } from './snapshot-image';
import type { LeaseRecord, LeaseRecords } from './lease-records';
import { parseOwner, type SandboxSpec } from './sandbox-spec';
import { RENEW_SCRIPT } from './lease-watchdog';
import { runScript } from './sandbox-control';

/** Everything a lease needs from the host that created it. */
export interface LeaseDeps {
  docker: Dockerode;
  container: Dockerode.Container;
  record: LeaseRecord;
  spec: SandboxSpec;
  records: LeaseRecords;
  events: EngineEvents;
  clock: Clock;
  logger: Logger;
  outputCapBytes: number;
  disk?: DiskGuardOptions;
  autoHeartbeat: boolean;
  /** The container was created for this lease just now: its watchdog holds a full TTL already. */
  armedNow?: boolean;
  /** Cgroup counters at the time the lease was taken (0 for a fresh container). */
  counters: { pidsMax: number; oomKill: number };
  /** Runs after the container is removed (egress teardown); awaited, so release returns with nothing left. */
  onReleased?: () => void | Promise<void>;
}

/**
 * The right to use one sandbox container. States: live → released (after {@link Lease.release},
 * which is idempotent); every other method refuses a released lease with `lease_released`.
 * `lost` becomes true when a heartbeat finds the record released or gone, or a command finds its
 * container stopped or vanished: another actor took the sandbox away, and this holder should stop
 * using it.
 */
export class Lease implements AsyncDisposable {
  readonly id: string;
  readonly containerId: string;
  readonly sessionId: string;
  private current: LeaseRecord;
  private released = false;
  private lostFlag = false;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly activity = new ExecActivity();
  private readonly earlier = new Map<string, EarlierCommand>();
  /**
   * What `SandboxHost.attach` found and stopped of the commands earlier hosts left here (undefined
   * on a lease this process created): the sweep a new owner accounts for in the run's record.
   */
  attachedEarlier: EarlierCommands | undefined;
  private readonly execHost: ExecHost;
  private readonly fileCtx: files.FileContext;
  private readonly logger: Logger;
  private readonly disk: DiskGuard;
  private readonly watch: DiskWatch;

  constructor(private readonly deps: LeaseDeps) {
    this.id = deps.record.id;
    this.containerId = deps.record.containerId;
    this.sessionId = deps.record.sessionId;
    this.current = deps.record;
    const ids: ErrorIds = { leaseId: this.id, containerId: this.containerId, sessionId: this.sessionId };
    this.logger = deps.logger.child(ids);
    this.disk = new DiskGuard(deps.container, deps.spec.resources.diskMb, deps.disk);
    this.watch = new DiskWatch(this.disk, this.logger);
    const owner: Owner = parseOwner(deps.spec.workspace.owner);
    this.execHost = {
      container: deps.container,
      containerId: this.containerId,
      events: deps.events,
      disk: this.disk,
      logger: this.logger,
      ids,
      workspace: deps.spec.workspace.path,
      owner: deps.spec.workspace.owner,
      defaultTimeoutMs: deps.spec.resources.commandTimeoutS * 1000,
      outputCapBytes: deps.outputCapBytes,
      counters: { ...deps.counters },
      activity: this.activity,
      track: (run) => this.watch.track(run),
    };
    this.fileCtx = {
      container: deps.container,
      workspace: deps.spec.workspace.path,
      owner,
      disk: this.disk,
      ids,
      exec: (argv, opts) => this.exec(argv, { ...opts, timeoutMs: 60_000 }),
    };
    if (deps.autoHeartbeat) this.scheduleHeartbeat();
  }

  /** The lease record as last written by this holder. */
  get record(): LeaseRecord {
    return this.current;
  }

  /** The `uid:gid` commands run as unless a caller passes `user`. */
  get owner(): string {
    return this.deps.spec.workspace.owner;
  }

  get lost(): boolean {
    return this.lostFlag;
  }

  get isReleased(): boolean {
    return this.released;
  }

  /** Runs a command in the sandbox; see {@link ExecResult} for what comes back. */
  exec(cmd: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    this.assertLive();
    return runExec(this.execHost, cmd, opts).then((r) => {
      if (r.sandboxLost) this.lostFlag = true;
      return r;
    });
  }

  /**
   * For a new owner, before it decides anything about the sandbox's run: kills every process an
   * earlier host started in the container (everything but init, the idle loop, the kept processes
   * of `keepProcesses` commands, and the commands of this lease), waits until they are gone, and
   * reports each earlier command by its tag: killed while running, or ended with its exit code.
   * `outcome: 'unstoppable'` says something survived `waitMs` (default 10 s): remove the
   * container. A command found by an earlier call keeps what that call said (`attach` makes the
   * first call, so a command it killed is reported `killed`, not as ended with exit 137).
   */
  async stopEarlierCommands(opts: { signal?: AbortSignal; waitMs?: number } = {}): Promise<EarlierCommands> {
    return this.stopEarlier({ ...opts, clean: false });
  }

  /** @internal {@link stopEarlierCommands}, also removing stale secret directories (attach, before any command runs). */
  async stopEarlier(opts: { signal?: AbortSignal; waitMs?: number; clean: boolean }): Promise<EarlierCommands> {
    this.assertLive();
    const d = this.deps;
    const r = await stopEarlierCommands({ docker: d.docker, container: d.container, containerId: this.containerId, owner: this.owner, activity: this.activity, logger: this.logger, known: this.earlier }, opts);
    // Counters of an older incarnation are history: they are the baseline from now on.
    const c = this.execHost.counters;
    c.pidsMax = Math.max(c.pidsMax, r.counters.pidsMax ?? 0);
    c.oomKill = Math.max(c.oomKill, r.counters.oomKill ?? 0);
    return { outcome: r.outcome, commands: r.commands, kept: r.kept, killedProcesses: r.killedProcesses };
  }

  /**
   * CPU the container used since it started (every process: commands, including those an earlier
   * host started and never measured, and the host's own scripts), in microseconds; undefined when
   * no counter can be read. What a new owner compares with the CPU the run's records counted.
   */
  cpuUsecTotal(): Promise<number | undefined> {
    return readCpuUsec(this.deps.container);
  }

  /**
   * True when the writable layer is over `diskMb` now. Measures only when it could be (see
   * README "Disk"), so a small layer costs nothing; a snapshot must never take an over-limit layer.
   */
  async overDiskLimit(): Promise<boolean> {
    this.assertLive();
    if (!this.disk.mayExceed()) return false;
    return (await this.disk.measure(performance.now())) > this.disk.limitBytes;
  }

  /** Every path the container changed against its image (`docker diff`, absolute paths). */
  changes(): Promise<Change[]> {
    this.assertLive();
    return changesOf(this.deps.container, this.containerId);
  }

  readFile(path: string, opts?: { maxBytes?: number }): Promise<Buffer> {
    this.assertLive();
    return files.readFile(this.fileCtx, path, opts);
  }

  writeFile(path: string, data: Buffer | string, opts?: { mode?: number }): Promise<void> {
    this.assertLive();
    return files.writeFile(this.fileCtx, path, data, opts);
  }

  list(path: string): Promise<files.DirEntry[]> {
    this.assertLive();
    return files.list(this.fileCtx, path);
  }

  /** Uploads a host directory; `skipped` names the FIFOs, sockets and devices it could not carry. */
  uploadDir(hostDir: string, toPath: string): Promise<{ files: number; bytes: number; skipped: SkippedEntry[] }> {
    this.assertLive();
    return files.uploadDir(this.fileCtx, hostDir, toPath);
  }

  downloadDir(path: string, hostDir: string): Promise<{ files: number; bytes: number }> {
    this.assertLive();
    return files.downloadDir(this.fileCtx, path, hostDir);
  }

  /** Non-directory entries below workspace directories, symlinks not followed (see artifact-files.ts). */
  listTree(dirs: Array<{ dir: string; maxDepth?: number }>): Promise<artifactFiles.TreeFile[]> {
    this.assertLive();
    return artifactFiles.listTree(this.fileCtx, dirs);
  }

  /** Where a workspace path really is, symlinks followed inside the container; an escape is said, not followed. */
  realFile(path: string): Promise<artifactFiles.RealFile> {
    this.assertLive();
    return artifactFiles.realFile(this.fileCtx, path);
  }

  /** Streams one regular file (an absolute, resolved path) out of the sandbox to `sink`. */
  copyFileOut<T>(real: string, maxBytes: number, sink: (data: Readable, size: number, mode: number) => Promise<T>, signal?: AbortSignal): Promise<T> {
    this.assertLive();
    return artifactFiles.copyFileOut(this.fileCtx, real, maxBytes, sink, signal);
  }

  /** The writable layer's size as the engine measures it now. */
  diskUsageBytes(): Promise<number> {
    this.assertLive();
    return this.disk.measure();
  }

  /**
   * Extends the lease by its TTL from now. False when the record is released or unknown: the lease
   * is lost, and the automatic heartbeat stops.
   */
  async heartbeat(): Promise<boolean> {
    this.assertLive();
    const expiresAt = this.deps.clock.now() + this.deps.spec.lease.ttlS * 1000;
    const ok = await this.deps.records.heartbeatLease(this.id, expiresAt);
    if (ok) {
      this.current = { ...this.current, expiresAt };
      this.renewWatchdog();
    } else {
      this.lostFlag = true;
      this.stopTimers();
      this.logger.warn('lease heartbeat refused: the lease is released or unknown');
    }
    return ok;
  }

  /**
   * Marks the record released, then removes the container. The record goes first: if this process
   * dies in between, the sweeper removes a container whose lease is released.
   */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.stopTimers();
    const at = this.deps.clock.now();
    let failure: unknown;
    try {
      await this.deps.records.releaseLease(this.id, at);
      this.current = { ...this.current, releasedAt: at };
    } catch (err) {
      failure = err;
    }
    try {
      await this.deps.container.remove({ force: true, v: true });
    } catch (err) {
      if (!isNotFound(err)) failure ??= err;
    }
    this.deps.events.forget(this.containerId);
    await this.deps.onReleased?.();
    if (failure !== undefined) {
      throw new BerthError('release_failed', `releasing lease ${this.id} failed; the sweeper will finish it`, {
        retryable: true,
        ids: { leaseId: this.id, containerId: this.containerId },
        cause: failure,
      });
    }
  }

  /** @internal Drops this handle without releasing the lease (an attach that failed): timers stop, methods refuse. */
  abandon(): void {
    this.released = true;
    this.stopTimers();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  private assertLive(): void {
    if (this.released) throw new BerthError('lease_released', `lease ${this.id} is released`, { ids: { leaseId: this.id, containerId: this.containerId } });
  }

  /**
   * Moves the sandbox's own deadline (lease-watchdog.ts) along with the record's. Not awaited: a
   * renewal that fails (an engine under load) is made good by the next heartbeat, well within the TTL.
   */
  private renewWatchdog(): void {
    runScript(this.deps.container, RENEW_SCRIPT, ['berth-renew', String(this.deps.spec.lease.ttlS)], '0').catch((err: unknown) => this.logger.debug({ err }, 'sandbox watchdog renewal failed; the next heartbeat renews it'));
  }

  private scheduleHeartbeat(): void {
    // An adopted sandbox may be close to its deadline (its earlier holder stopped renewing it); a
    // container created for this lease was armed with the full TTL a moment ago (an exec saved).
    if (!this.deps.armedNow) this.renewWatchdog();
    const every = this.deps.spec.lease.heartbeatS * 1000;
    this.heartbeatTimer = setInterval(() => {
      this.heartbeat().catch((err: unknown) => this.logger.warn({ err }, 'automatic heartbeat failed'));
    }, every);
    this.heartbeatTimer.unref();
  }

  private stopTimers(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    this.watch.stop();
  }
}
