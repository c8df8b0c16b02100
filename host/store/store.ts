import type {
  CommitRecord,
  Effect,
  Entry,
  Run,
  RunState,
  RunTransition,
  Session,
  Snapshot,
  Json,
  StoredDocument,
  Submission,
  Task,
  TaskStatus,
} from '../model';
import type { LeaseRecords } from '../model';
import type { EgressAuditRecords } from '../model';
import type { CommitInput, CommitResult, NewArtifact } from './commit-input';
import type { AcceptanceReads } from './read-ports';
import type { CostRecords } from './read-ports';
import type { ForkReads } from './read-ports';

/** Which runs {@link Store.listRuns} returns. */
export interface RunFilter {
  sessionId?: string;
  states?: readonly RunState[];
  kind?: string;
  newest?: number;
}

/** An artifact record as committed (see {@link NewArtifact}). */
export interface StoredArtifact extends NewArtifact {
  sessionId: string;
  commitSeq: number;
  createdAt: number;
}
import type { CommitLogRecords } from './commit-log';
import type { OutputRecords } from './output';
import type { RunListReads } from './run-list';
import type { ImportedRunRecords } from './imported';
import type { OwnershipRecords } from './ownership';
import type { RegistryDeleteRecords } from './registry-deletes';

/**
 * One page of a list in its usual order: `limit` rows after the first `offset`. Rows are only ever
 * appended in that order (tasks by insertion, snapshots by commit, effects by creation), so reading
 * page after page sees each row once even while a run adds more.
 */
export interface Page {
  offset: number;
  limit: number;
}

export interface TaskFilter {
  runId?: string;
  parentId?: string;
  sessionId?: string;
  /** Tasks of any of these sessions (none: no task). */
  sessionIds?: string[];
  statuses?: TaskStatus[];
  /**
   * Only the `newest` tasks by insertion order (still answered oldest first): a parent reading the
   * child it spawned last reads one row, not every child of a run thousands of steps long.
   */
  newest?: number;
  /** A page of the answer (not with `newest`): a long run's tasks read in bounded pieces (`berth export`). */
  page?: Page;
}

export interface EntryFilter {
  afterSeq?: number;
  runId?: string;
  conversationId?: string;
  /** Only entries of these kinds (a reader that needs two kinds of a long run's thousands of entries). */
  kinds?: string[];
  limit?: number;
}

/**
 * The durable store. Async so that a networked store (PostgreSQL, for several hosts) has the same
 * shape; the SQLite store answers synchronously underneath. Every state change goes through
 * {@link Store.commit}; the other writes are lease bookkeeping, which is not session state.
 */
export interface Store extends LeaseRecords, EgressAuditRecords, AcceptanceReads, CostRecords, CommitLogRecords, ImportedRunRecords, OwnershipRecords, ForkReads, RegistryDeleteRecords, OutputRecords, RunListReads {
  readonly location: string;
  /** True when this process can only read the store (its file, directory or mount is read-only to it): every commit is refused. */
  readonly readOnly?: boolean;
  commit(input: CommitInput): Promise<CommitResult>;

  getSession(id: string): Promise<Session | undefined>;
  /** `limit`: at most that many, the oldest after `afterSeq` (a page of a long session's log). */
  listCommits(sessionId: string, afterSeq?: number, limit?: number): Promise<CommitRecord[]>;
  getSubmission(id: string): Promise<Submission | undefined>;
  findSubmission(requestId: string): Promise<Submission | undefined>;
  getRun(id: string): Promise<Run | undefined>;
  /**
   * In creation order (created_at, id). `kind` keeps one kind of run (`agent`, `plan`); `newest: n`
   * keeps the last n of that order, read by index: a session's runs grow with every message or MCP
   * call, so a per-call read of "its newest run" must not read them all.
   */
  listRuns(filter?: RunFilter): Promise<Run[]>;
  listRunTransitions(runId: string): Promise<RunTransition[]>;
  getTask(id: string): Promise<Task | undefined>;
  /** In the order the tasks were created by commits (insertion order, never the wall clock). */
  listTasks(filter?: TaskFilter): Promise<Task[]>;
  /** Earliest `wakeAt` of a sleeping task, or null. */
  nextWakeAt(): Promise<number | null>;
  listEntries(sessionId: string, filter?: EntryFilter): Promise<Entry[]>;
  getDocument(id: string): Promise<StoredDocument | undefined>;
  listDocuments(filter: { runId?: string; sessionId?: string }): Promise<StoredDocument[]>;
  getEffect(id: string): Promise<Effect | undefined>;
  /**
   * `earlier` (with `runId`): also the effects the run attempted before a later run took them over
   * (a logical effect attempted afresh moves to the new run; the run it failed in still lists it).
   * `newest`: only the last that many by creation (a page of a long run's effects), still oldest first.
   * `page`: a page of the whole answer in creation order (not with `newest`).
   */
  listEffects(filter: { runId?: string; taskId?: string; earlier?: boolean; newest?: number; page?: Page }): Promise<Effect[]>;
  getSnapshot(id: string): Promise<Snapshot | undefined>;
  /**
   * Oldest first. Pruned snapshots are included (their records stay; only the image is gone)
   * unless `pruned` says which: `false` only those not pruned, `true` only pruned ones; `pushed`
   * only those with a registry copy. Retention reads what it can still prune, not every record a
   * long run left. `page` (with `runId` or `sessionId`, not with `newest`): a page of that answer.
   */
  listSnapshots(filter: { runId?: string; sessionId?: string; newest?: number; page?: Page; pruned?: boolean; pushed?: true }): Promise<Snapshot[]>;
  /**
   * Of the snapshot records not pruned: how many have a registry copy, how many not, and the bytes
   * recorded for those that do. One aggregate read (a `/metrics` scrape), whatever the store holds.
   */
  snapshotTotals(): Promise<{ pushed: number; unpushed: number; pushedBytes: number }>;
  /** Retention bookkeeping: the snapshot's image was removed. Not session state, so not a commit. */
  markSnapshotPruned(id: string, at: number): Promise<void>;
  /**
   * An `async` push landed: records the manifest reference of a committed snapshot (compare-and-set:
   * only a record not yet pushed). False when no such record exists (not committed yet, or pushed).
   */
  markSnapshotPushed(id: string, registryRef: string, at: number): Promise<boolean>;
  /** Per-image workspace manifests: derived data (recomputable from the image), cached for incremental digests. */
  putWorkspaceManifest(imageId: string, manifest: Json): Promise<void>;
  getWorkspaceManifest(imageId: string): Promise<Json | undefined>;
  /**
   * Snapshot images this host built as one small layer on a parent image and has not yet loaded
   * into the engine (issue 14): durable here before the snapshot record commits, so any host that
   * shares the store can load the image a record names. Deleted once the engine holds the image.
   */
  putSnapshotDelta(delta: SnapshotDelta): Promise<void>;
  getSnapshotDelta(imageId: string): Promise<SnapshotDelta | undefined>;
  deleteSnapshotDelta(imageId: string): Promise<void>;
  /** Every pending delta without its bytes, oldest first (for `berth gc`). */
  listSnapshotDeltas(): Promise<Array<Omit<SnapshotDelta, 'config' | 'layer'>>>;
  /** Every artifact record of the run, in step index, generation, path order (superseded ones included). */
  listArtifacts(runId: string): Promise<StoredArtifact[]>;
  close(): Promise<void>;
}

/** A snapshot image not yet in the engine: its config (whose sha256 is `imageId`) and its one layer over `parentImageId`. */
export interface SnapshotDelta {
  imageId: string;
  parentImageId: string;
  /** The snapshot the image was built for: its tag when the image is loaded. */
  snapshotId: string;
  config: Buffer;
  /** The uncompressed layer tar (its sha256 is the config's last diff id). */
  layer: Buffer;
  createdAt: number;
}
