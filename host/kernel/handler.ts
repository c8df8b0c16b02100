import type { Logger } from 'pino';
import type { Effect, Json, JoinPolicy, ReplayPolicy, RunState, Task, TaskError } from '../model';
import type { NewAcceptance, NewArtifact, NewEntry, NewSnapshot } from '../store';
import type { Page, Store } from '../store';

/** A subtask to create; the parent owns it (cancellation and `completing` follow ownership). */
export interface SpawnSpec {
  kind: string;
  version?: number;
  input: Json;
  /**
   * The subtask's first step, when the parent's decision already holds it: the phase to begin in
   * (instead of the handler's initial one), its checkpoint, and the effect intents that phase
   * works under (recorded as the subtask's own). The row is created `running`, so a host that
   * dies before the phase ran counts a restart and re-enters it, as after a start commit: the
   * parent's commit stands for the subtask's start and first step. `id` is the subtask's id
   * (effect ids usually name it).
   */
  begin?: { id: string; phase: string; checkpoint: Json; effects?: EffectIntent[] };
}

/** An entry a phase wants committed with its decision. */
export interface EntryWrite {
  kind: string;
  body: Json;
  conversationId?: string | null;
}

/** A document operation a phase wants committed with its decision. */
export type DocumentWrite =
  | { documentId: string; create: { type: string; initial?: Json } }
  | { documentId: string; op: Json };

/** An effect intent recorded with the decision, executed by a later phase. */
export interface EffectIntent {
  id: string;
  kind: string;
  intent: Json;
  replay: ReplayPolicy;
}

export interface PhaseWrites {
  entries?: EntryWrite[];
  documents?: DocumentWrite[];
  effects?: EffectIntent[];
  /** Sandbox snapshots tied to this checkpoint, committed with it. */
  snapshots?: Array<Omit<NewSnapshot, 'runId' | 'taskId'>>;
  /** Acceptance decisions on the task's run, committed with the decision (host/acceptance). */
  acceptance?: Array<Omit<NewAcceptance, 'runId'>>;
  /** Artifact records of this checkpoint (a plan step's copied-out files), committed with it. */
  artifacts?: Array<Omit<NewArtifact, 'runId' | 'taskId'>>;
}

/** A run state change a phase asks for alongside its decision. */
export type RunMove = { to: RunState; reason: string };

/** What a phase decides; the host commits it atomically with the phase's writes. */
export type Decision = (
  /** `run` moves the run in the same commit when that is a legal edge from its state then (e.g. into and out of `retry_wait`). */
  | { type: 'next'; phase: string; checkpoint?: Json; run?: RunMove }
  | { type: 'sleep'; until: number; phase: string; checkpoint?: Json; run?: RunMove }
  | { type: 'spawn'; tasks: SpawnSpec[]; join: JoinPolicy; phase: string; checkpoint?: Json }
  | { type: 'complete'; result?: Json }
  | { type: 'fail'; error: TaskError }
  /**
   * Wait for an outside signal (delivered with {@link Kernel.deliver}), optionally moving the run
   * (e.g. to `needs_reconciliation` or `awaiting_approval`) in the same commit.
   */
  | { type: 'await'; signal: string; phase: string; checkpoint?: Json; run?: RunMove }
  /** The phase cannot know whether its action happened; the task ends `interrupted`. */
  | { type: 'interrupt'; reason: string; result?: Json }
) & { writes?: PhaseWrites };

/** Outcome of {@link PhaseContext.perform}. */
export type PerformOutcome<R extends Json> =
  | { status: 'done'; receipt: R; reused: boolean }
  | { status: 'uncertain'; effect: Effect; reason: string };

/**
 * Answer of a lookup about an effect that may have happened: found (with the service's receipt)
 * or not found (it did not happen). A lookup that cannot get an answer throws.
 */
export type Verdict<R extends Json = Json> = { done: true; receipt: R } | { done: false };

/** A lookup by effect kind, from the stored effect (its intent) alone. */
export type EffectVerifier = (effect: Effect, signal: AbortSignal) => Promise<Verdict>;

/**
 * One external action. Its `id` is the logical effect key, store-wide: performing an id that is
 * already `confirmed` returns that receipt without acting; one that definitely did not happen
 * (`failed`) is attempted afresh; one that may have happened is verified (or reconciled) first.
 *
 * The action reports failures by throwing; what the error proves decides the record (see
 * `delivery.ts`): throw `notSent(...)` or `rejected(...)` (or `httpAnswerError`) only when the
 * request certainly was not applied. Anything else (a bare `fetch failed`, a reset, a timeout,
 * an abort) is treated as "may have been received": never recorded `failed`. A `fetch` error
 * whose cause proves the connection was never made (ECONNREFUSED, a DNS failure) is classified
 * `not_sent` without any help.
 */
export interface PerformSpec<R extends Json> {
  id: string;
  kind: string;
  intent: Json;
  replay: ReplayPolicy;
  /**
   * Asked about the original effect before a `verify` action is repeated. A throw (service
   * unreachable) is retried with backoff in `retry_wait`; when the budget is spent, the effect is
   * `unknown` and the outcome `uncertain`.
   */
  verify?: (effect: Effect, signal: AbortSignal) => Promise<Verdict<R>>;
}

export interface PhaseContext {
  readonly task: Task;
  readonly input: Json;
  readonly checkpoint: Json;
  /** Cancelled when the task is cancelled or the host shuts down. */
  readonly signal: AbortSignal;
  /** True when this phase was already entered by a host that died before committing its decision. */
  readonly recovered: boolean;
  readonly store: Store;
  readonly log: Logger;
  now(): number;
  /**
   * Owned subtasks in the order their commits created them (the store's insertion order, not the
   * wall clock, which can step backwards), so `.at(-1)` is the child spawned last. `newest`: only
   * that many of the last spawned (a phase that needs the child it just waited for reads one row,
   * whatever the number of children a long run has). `page`: a page of them in that order (a
   * phase that walks every child of a long run holds one page at a time).
   */
  children(opts?: { newest?: number; page?: Page }): Promise<Task[]>;
  readDocument<T extends Json = Json>(documentId: string): Promise<{ state: T; version: number } | undefined>;
  /**
   * Runs one external action under its effect record: the intent (and `executing` mark) is
   * committed before the action, the receipt commits with this phase's decision. On recovery it
   * reuses a confirmed receipt, re-runs only `safe` actions, asks `verify` first, and never
   * re-runs a `never` action whose outcome is unknown.
   */
  perform<R extends Json>(spec: PerformSpec<R>, action: (signal: AbortSignal) => Promise<R>): Promise<PerformOutcome<R>>;
  /**
   * Awaits `waiting` without holding one of the host's phase slots: for a phase that waits for
   * other tasks this host runs, which may need a slot to get there (holding it could leave every
   * slot to waiters and the awaited task queued behind them for good).
   */
  idle<T>(waiting: Promise<T>): Promise<T>;
  /**
   * Calls `fn` once this phase's decision is settled: `true` when the decision it returned was
   * committed, `false` when it was not (refused, dropped as the host stopped, replaced because the
   * phase threw or a cancel came). Something a phase took from this process to be recorded once
   * (what a resume verified of the sandbox) goes back for the next phase to record when it is `false`.
   */
  onSettled(fn: (committed: boolean) => void): void;
}

export type Phase = (ctx: PhaseContext) => Promise<Decision>;

/** The code for one task kind and version. The store keeps only data; this is looked up at run time. */
export interface TaskHandler {
  kind: string;
  version: number;
  /** Older versions whose saved state this handler continues unchanged. */
  accepts?: number[];
  initialPhase: string;
  phases: Record<string, Phase>;
  /** Restarts (host found the task running at start-up) allowed before the task fails. Default 5. */
  restartLimit?: number;
  /** Retries of a phase that threw a retryable error. Default 3. */
  maxRetries?: number;
  /**
   * Stops what a phase left running outside the host when the host running it died (e.g. a
   * command in the sandbox), before a cancel of the task is recorded. Called for a cancelled task
   * found `running` with no phase of it executing here; a throw leaves the task for a later try,
   * so nothing is recorded while the work may still go on.
   */
  stopAbandoned?: (task: Task, d: { store: Store; signal: AbortSignal; log: Logger }) => Promise<void>;
  /**
   * Entries a cancel of an idle task (pending, waiting, sleeping) commits together with its
   * terminal state, so whatever the task held open (an approval request) is closed in the record
   * by the same commit that ended it, never left to be inferred.
   */
  cancelEntries?: (task: Task, d: { store: Store }) => Promise<NewEntry[]>;
  /**
   * How a cancel settles an effect of this task that was in flight. By default it becomes
   * `unknown` and the run waits for an operator; a kind that can prove the action changed nothing
   * outside the run (a safe plan step in a sandbox with no network) answers `not_applied` instead,
   * so the cancel does not park on a question whose answer cannot matter.
   */
  settleOnCancel?: (task: Task, effect: Effect, d: { store: Store }) => Promise<{ status: 'not_applied'; reason: string } | null>;
}
