import type { Extension } from '../agent/custom-tasks';
import { BerthError } from '../errors';
import type { ContinueSession, StartAgentRun } from '../agent';
import { submit } from '../kernel';
import type { Json, Run } from '../model';
import { linkSignals, newId } from '../support';
import { submitAgent, submitChat } from './agents';
import { checkStore, exportRun, importRecord, registeredPolicies } from '../record';
import type { HostRuntime } from '../runtime/host-runtime';
import { assemble, type HostParts, type OpenOptions } from './assemble';
import { cancel, decideCall, getRunOrThrow, judge } from './decisions';
import { drive, startHost, takeRun, type Driven } from './drive';
import { followRun, waitForRun, type FollowOptions, type RunEvent, type RunOrOutputEvent } from './events';
import { fork, type ForkOptions } from './forks';
import { gc, type GcOptions } from './gc';
import { orphans } from './orphans';
import { preparePlan, startPlan, submitDetached, type PlanSource } from './plans';
import { reconcile, type ReconcileChoice } from './reconcile';
import { connect, type ConnectOptions, type RemoteBerth } from './remote';
import { hostRuntime, operator, type RuntimeOptions } from './runtime';
import { startWorker, type RunningWorker, type WorkerOptions } from './worker';

/** What {@link Berth.open} takes: the store, and optionally every other part and the task kinds of an application. */
export interface BerthOptions extends OpenOptions {
  /** Application task kinds and document types (`extension(...)` of `defineTask` kinds). */
  extensions?: Extension[];
  /** The actor recorded for decisions made through this host (default `user:$BERTH_OPERATOR` or the login name). */
  actor?: string;
  /** Stops every long call of this host (drives, follows, waits) that was not given a signal of its own, and any it was given too. */
  signal?: AbortSignal;
}

/** Options of every call that drives a run: stop it with `signal` (the run stays as it is; a resume continues). */
export interface DriveOptions {
  signal?: AbortSignal;
  /** Take the run from a live owner (recorded with the actor). */
  takeOver?: boolean;
  /** The session lease while driving (ms). */
  leaseTtlMs?: number;
  onProgress?: RuntimeOptions['onProgress'];
}

/**
 * One Berth host, in process: the store, the Docker engine, the registry transport, the artifact
 * store, the logger and the clock, built once; and run policy (submit, drive, resume, run end,
 * reconcile, cancel, decisions, fork, records, gc, workers). The `berth` CLI, `berth serve` and
 * `berth worker` are thin adapters over it.
 *
 * ```ts
 * await using berth = await Berth.open({ store: '.berth/berth.db' });
 * const { run } = await berth.submitPlan('examples/c-hello/plan.yaml');
 * for await (const e of berth.events(run.id)) console.log(e.seq, e.label);
 * ```
 */
export class Berth implements HostParts, AsyncDisposable {
  readonly store;
  readonly docker;
  readonly sandbox;
  readonly artifacts;
  readonly logger;
  readonly clock;
  readonly hostId;
  readonly registry;
  readonly extensions: Extension[];
  readonly actor: string;
  private readonly signal: AbortSignal | undefined;
  private closed = false;

  private constructor(parts: HostParts, o: { extensions?: Extension[]; actor?: string; signal?: AbortSignal }) {
    ({ store: this.store, docker: this.docker, sandbox: this.sandbox, artifacts: this.artifacts, logger: this.logger, clock: this.clock, hostId: this.hostId, registry: this.registry } = parts);
    this.extensions = o.extensions ?? [];
    this.actor = o.actor ?? operator();
    this.signal = o.signal;
  }

  /** The caller's signal and the host's, whichever aborts first; detached from both when disposed (see linkSignals). */
  private either(signal?: AbortSignal) {
    return linkSignals([signal, this.signal]);
  }

  /** Opens a host over a SQLite path or a PostgreSQL URL; Docker from `DOCKER_HOST`, registry from `BERTH_REGISTRY` by default. */
  static async open(o: BerthOptions): Promise<Berth> {
    return Berth.from(assemble(o), o);
  }

  /** A client of `berth serve`'s versioned API on another machine, with this interface for what makes sense remotely. */
  static connect(o: ConnectOptions): RemoteBerth {
    return connect(o);
  }

  /** A host over parts built elsewhere (the CLI builds its context with {@link assemble}). */
  static from(parts: HostParts, o: { extensions?: Extension[]; actor?: string; signal?: AbortSignal } = {}): Berth {
    return new Berth(parts, o);
  }

  /** The runtime every driving path uses (exposed for adapters; most programs need none). */
  runtime(o: RuntimeOptions): HostRuntime {
    return hostRuntime(this, o);
  }

  /** Submits a plan run (admitted) for a worker or a later {@link drive}; the same request id returns the same run. */
  async submitPlan(plan: PlanSource, o: { requestId?: string; tags?: string[] } = {}): Promise<{ run: Run; created: boolean }> {
    const loaded = await preparePlan(this, plan);
    const { run, created } = await submitDetached(this, loaded, o);
    return { run, created };
  }

  /**
   * Submits a run whose root task is an application task kind (registered through `extensions`),
   * for a worker or a later {@link drive}; the same request id returns the same run.
   */
  async submitTask(root: { kind: string; input: Json; requestId?: string; runKind?: string }): Promise<{ run: Run; created: boolean }> {
    const rt = this.runtime({ claim: 'none' });
    const { run, created } = await submit({ store: this.store, kernel: rt.kernel, registry: rt.registry }, { requestId: root.requestId ?? newId('req'), runKind: root.runKind ?? root.kind, root: { kind: root.kind, input: root.input } });
    return { run, created };
  }

  /** Submits an agent run (a user message in a new session) for a worker or a later {@link drive}. */
  async submitAgent(s: StartAgentRun): Promise<{ run: Run; created: boolean }> {
    const { run, created } = await submitAgent(this, s);
    return { run, created };
  }

  /** Another message in an agent session, as a new run for a worker or a later {@link drive}. */
  async chat(c: ContinueSession): Promise<{ run: Run; created: boolean }> {
    const { run, created } = await submitChat(this, c);
    return { run, created };
  }

  /** Submits a plan run and drives it here until it settles (or `signal` stops this host). */
  async runPlan(plan: PlanSource, o: DriveOptions & { requestId?: string } = {}): Promise<Driven & { created: boolean }> {
    const loaded = await preparePlan(this, plan);
    const { rt, run, created } = await startPlan(this, loaded, o);
    using link = this.either(o.signal);
    return { ...(await drive(this, rt, run.id, link.signal)), created };
  }

  /** Claims the run (a live owner only with `takeOver`) and drives it here until it settles; works for plan and agent runs. */
  async drive(runId: string, o: DriveOptions = {}): Promise<Driven> {
    const run = await getRunOrThrow(this.store, runId);
    const { rt } = await startHost(this, { ttlMs: o.leaseTtlMs, onProgress: o.onProgress });
    await takeRun(this, rt, run, { takeOver: o.takeOver, actor: this.actor });
    using link = this.either(o.signal);
    return await drive(this, rt, runId, link.signal);
  }

  /** {@link drive} after a crash, a stop or a reconcile. */
  resume(runId: string, o: DriveOptions = {}): Promise<Driven> {
    return this.drive(runId, o);
  }

  /** The run, or `run_not_found`. */
  get(runId: string): Promise<Run> {
    return getRunOrThrow(this.store, runId);
  }

  list(filter?: Parameters<HostParts['store']['listRuns']>[0]): Promise<Run[]> {
    return this.store.listRuns(filter);
  }

  /** The run's committed changes in commit order, from after `afterSeq`, until it settles (see {@link FollowOptions}). */
  events(runId: string, o: FollowOptions & { output: true }): AsyncIterable<RunOrOutputEvent>;
  events(runId: string, o?: FollowOptions): AsyncIterable<RunEvent>;
  events(runId: string, o: FollowOptions = {}): AsyncIterable<RunOrOutputEvent> {
    const store = this.store;
    const link = () => this.either(o.signal);
    return {
      async *[Symbol.asyncIterator]() {
        // Linked when iteration starts and detached when it ends, however it ends.
        using l = link();
        yield* followRun(store, runId, { ...o, signal: l.signal } as FollowOptions & { output: true });
      },
    };
  }

  /** Resolves once the run settles (whoever drives it). */
  async wait(runId: string, o: { signal?: AbortSignal } = {}): Promise<Run> {
    using link = this.either(o.signal);
    return await waitForRun(this.store, runId, { ...o, signal: link.signal });
  }

  cancel(runId: string) {
    return cancel(this, runId, this.actor);
  }

  approve(runId: string, callOrApprovalId: string, o: { digest?: string } = {}) {
    return decideCall(this, runId, callOrApprovalId, 'approve', this.actor, o.digest);
  }

  deny(runId: string, callOrApprovalId: string) {
    return decideCall(this, runId, callOrApprovalId, 'deny', this.actor);
  }

  accept(runId: string, o: { requestId?: string } = {}) {
    return judge(this.store, runId, 'accepted', this.actor, o);
  }

  reject(runId: string, reason: string, o: { requestId?: string } = {}) {
    return judge(this.store, runId, 'rejected', this.actor, { ...o, reason });
  }

  /** Decides a run in `needs_reconciliation`; a decision this host must carry out is driven here to the end. */
  async reconcile(runId: string, choice: ReconcileChoice, o: DriveOptions = {}) {
    const r = await reconcile(this, runId, choice, this.actor, { onProgress: o.onProgress });
    if (r.kind !== 'drive') return r;
    using link = this.either(o.signal);
    return { kind: 'driven' as const, reason: r.reason, verified: r.verified, ...(await drive(this, r.rt, runId, link.signal)) };
  }

  /** A new run from a checkpoint of `runId` (see {@link ForkOptions}); driven here unless `detach`. */
  async fork(runId: string, o: Omit<ForkOptions, 'actor'>, d: DriveOptions = {}) {
    const f = await fork(this, runId, { ...o, actor: this.actor });
    if (!f.rt) return { run: f.run, created: f.created, point: f.point, driven: null };
    using link = this.either(d.signal);
    return { run: f.run, created: f.created, point: f.point, driven: await drive(this, f.rt, f.run.id, link.signal) };
  }

  /** The run's record: one versioned document with the digest of its canonical form. */
  export(runId: string) {
    // The retry budget of every task kind this host can run (built-in and extension kinds).
    return exportRun(this.store, runId, this.clock.now(), { policies: registeredPolicies(this.runtime({ claim: 'none' }).registry) });
  }

  /** Loads an exported record as a read-only run (refused if altered). */
  async import(text: string, source = 'import') {
    const r = await importRecord(this.store, text, source, this.clock.now());
    // Its snapshot images here carry the exporting store's labels only: this store's marker lets
    // `berth gc --orphans` read its records before removing them (host/sandbox/store-marker.ts).
    await this.sandbox.markStore().catch((err: unknown) => this.logger.debug({ err }, 'no store marker left on the engine'));
    return r;
  }

  /** Evaluates the run invariants over the given runs (or all). */
  check(runIds: string[] | 'all' = 'all') {
    return checkStore(this.store, runIds, this.clock.now());
  }

  gc(o: GcOptions = {}) {
    return gc(this, o);
  }

  /** `berth gc --orphans`: other stores' leftovers on this engine, by store; `remove` takes a gone store's. */
  orphans(o: { remove?: boolean } = {}) {
    return orphans(this, o);
  }

  /** Starts a fleet worker on this host (the same runtime `runPlan` uses); `drain` stops it. */
  worker(o: WorkerOptions = {}): Promise<RunningWorker> {
    return startWorker(this, o);
  }

  /** Closes the engine connections and the store; background work of the runtimes was awaited when they stopped. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sandbox.close().catch((err: unknown) => this.logger.warn({ err }, 'closing the sandbox host failed'));
    await this.store.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

export { BerthError };
