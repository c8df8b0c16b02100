import type {
  AcceptanceDecision,
  EffectStatus,
  Json,
  ReplayPolicy,
  RunState,
  SettledBy,
  RunVersions,
  TaskError,
  TaskOutcome,
  Task,
  TaskStatus,
  WaitSpec,
} from '../model';

export interface NewTask {
  id: string;
  runId: string | null;
  parentId: string | null;
  kind: string;
  kindVersion: number;
  phase: string;
  input: Json;
  checkpoint?: Json;
  status?: TaskStatus;
}

/** Fields a transition may set; absent fields keep their value. */
export interface TaskChanges {
  status?: TaskStatus;
  phase?: string;
  checkpoint?: Json;
  attempts?: number;
  restarts?: number;
  wait?: WaitSpec | null;
  wakeAt?: number | null;
  outcome?: TaskOutcome | null;
  result?: Json;
  error?: TaskError | null;
  blockedReason?: string | null;
}

/** Compare-and-set on `version`: rejected (and the whole commit with it) when the row moved on. */
export interface TaskTransitionInput {
  taskId: string;
  expectVersion: number;
  set: TaskChanges;
}

export interface NewRun {
  id: string;
  kind: string;
  submissionId: string | null;
  rootTaskId: string | null;
  versions: RunVersions;
  /** The reason of the run's first transition (default `submitted`); a fork names where it came from. */
  reason?: string;
  /** The run this one was forked from (a plan fork, or the first run of a forked session): what `listForks` finds it by. */
  forkedFromRunId?: string | null;
}

/** Compare-and-set on the run state; the edge must be legal in the run state machine. */
export interface RunTransitionInput {
  runId: string;
  from: RunState;
  to: RunState;
  actor: string;
  reason: string;
  versions?: RunVersions;
  /** Skip this transition (without conflict) while a task of the run still waits on this signal, checked inside the commit. */
  unlessWaiting?: string;
  /**
   * An ownership change (an operator's take-over, issue 15) recorded in the transition log without
   * a state change: `from` must equal `to` and the run must be in it. Not an edge of the state machine.
   */
  ownerChange?: boolean;
  /**
   * Effects an operator's `reconcile --fail` ends the run with while nobody knows whether they
   * happened: a final state is otherwise refused while an effect of the run is `executing` or
   * `unknown`. Only these ids are let through (one that turned uncertain meanwhile still
   * conflicts); they stay uncertain on record, and a final run never runs them again.
   */
  leaveUncertain?: string[];
}

export interface NewEntry {
  id: string;
  conversationId?: string | null;
  runId?: string | null;
  taskId?: string | null;
  kind: string;
  body: Json;
}

/** One document operation; `baseline` (the state after this op) is stored when the caller decides a baseline is due. */
export interface DocumentOpInput {
  documentId: string;
  /** Present for the operation that creates the document (expectVersion must then be 0). */
  create?: { type: string; runId: string | null; initial: Json };
  expectVersion: number;
  op: Json;
  baseline?: Json;
}

export interface EffectWrite {
  id: string;
  /** Present to create the effect; creating an existing effect with the same intent is a no-op, with another intent a conflict. */
  create?: { runId: string | null; taskId: string | null; kind: string; intent: Json; replay: ReplayPolicy };
  expectStatus?: EffectStatus;
  /**
   * `owner` moves the effect to another run and task (and to the commit's session): a logical
   * effect that did not happen, attempted afresh by a later submission, belongs to that attempt.
   */
  set?: { status?: EffectStatus; attempts?: number; receipt?: Json; error?: Json; owner?: { runId: string | null; taskId: string | null } };
  /**
   * How the outcome this write records was learnt, kept on the attempt it settles. Absent: an
   * operator's typed receipt says `operator` (or `restore`) and who, anything else is the action's `reply`.
   */
  settle?: { by: SettledBy; actor?: string };
}

/** A sandbox snapshot tied to the checkpoint committed with it. */
export interface NewSnapshot {
  id: string;
  runId: string | null;
  taskId: string | null;
  leaseId: string;
  imageId: string;
  workspaceDigest: string;
  sizeBytes: number;
  /** Which checkpoint of the run this snapshot covers (e.g. "step:3"). */
  checkpoint: string;
  parentId: string | null;
  /** Set when the push was acknowledged before this commit (`snapshot.push: sync`). */
  registryRef?: string | null;
  pushedAt?: number | null;
}

/** An acceptance decision on a run, committed (see host/acceptance); idempotent by `requestId`. */
export type NewAcceptance = Omit<AcceptanceDecision, 'at' | 'commitSeq'>;

/**
 * A file a plan step produced, copied into the artifact store and committed with the step's
 * result: `sha256` addresses its bytes there; (run, step index, generation) says which execution
 * made it, so a re-run in a later generation supersedes it.
 */
export interface NewArtifact {
  id: string;
  runId: string;
  taskId: string | null;
  stepIndex: number;
  generation: number;
  step: string;
  /** Workspace-relative, `/`-separated. */
  path: string;
  sizeBytes: number;
  sha256: string;
  /** The snapshot committed with the same step (null when the step took none). */
  snapshotId: string | null;
  /** Permission bits of the file in the sandbox (`0o755` for a test binary); absent when not recorded (before schema 24). */
  mode?: number;
}

export interface NewSubmission {
  id: string;
  requestId: string;
  runId: string;
  input: Json;
}

/**
 * Everything one commit may change. Applied atomically: all of it or none of it.
 * `label` names the commit boundary for fault points and the commit log.
 */
export interface CommitInput {
  sessionId: string;
  label: string;
  actor?: string;
  /**
   * The claim the commit is written under: `scope` must be `session:<sessionId>` (any other scope is
   * `bad_commit`), and the commit is refused (conflict `fence`) unless that session's ownership row
   * still has this epoch, is not released and its lease has not run out on the database clock,
   * checked inside the commit's transaction. Absent: an unfenced write (a submission creating its
   * session, an operator's compare-and-set decision).
   */
  fence?: { scope: string; epoch: number };
  createSession?: { meta?: Json };
  conversations?: Array<{ id: string }>;
  submissions?: NewSubmission[];
  runs?: NewRun[];
  runTransitions?: RunTransitionInput[];
  entries?: NewEntry[];
  documentOps?: DocumentOpInput[];
  tasks?: NewTask[];
  taskTransitions?: TaskTransitionInput[];
  /** Ownership checks that write nothing: the commit is refused unless each task is still at this version. */
  expectTasks?: Array<{ taskId: string; version: number }>;
  /** Durable cancellation intent; does not bump versions, so an in-flight phase can still commit its result. */
  cancelTasks?: string[];
  effects?: EffectWrite[];
  snapshots?: NewSnapshot[];
  /** Acceptance decisions; a request id already recorded writes nothing (the same decision asked again). */
  acceptance?: NewAcceptance[];
  artifacts?: NewArtifact[];
}

/**
 * Why a fenced commit was refused: another host claimed the session (`taken`, `actual` is its
 * epoch), the lease ran out with nobody claiming it (`expired`), its owner gave it up
 * (`released`), or the session has no ownership row (`missing`: never claimed).
 */
export type FenceRefusal = 'taken' | 'expired' | 'released' | 'missing';

export type CommitConflict =
  | { kind: 'task_version'; taskId: string; expected: number; actual: number | null }
  | { kind: 'run_state'; runId: string; expected: RunState; actual: RunState | null }
  | { kind: 'document_version'; documentId: string; expected: number; actual: number | null }
  | { kind: 'effect_status'; effectId: string; expected: EffectStatus; actual: EffectStatus | null }
  | { kind: 'effect_intent'; effectId: string }
  | { kind: 'fence'; scope: string; expected: number; actual: number | null; reason: FenceRefusal }
  | { kind: 'duplicate_request'; requestId: string; submissionId: string; runId: string }
  | { kind: 'unresolved_effects'; runId: string; effectIds: string[] };

/**
 * A commit either happened (with its per-session sequence number) or wrote nothing and says why.
 * `tasks`: the rows of the tasks its transitions changed, as the commit left them (read inside its
 * transaction, so exact at `seq` whatever else was committed before it).
 */
export type CommitResult = { ok: true; seq: number; at: number; tasks?: Task[] } | { ok: false; conflict: CommitConflict };
