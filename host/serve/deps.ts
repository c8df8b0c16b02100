import type { ImageFileReader } from './snapshot-diff';
import type { AcceptanceView } from '../acceptance';
import type { ArtifactStore } from '../artifacts';
import type { RunCost } from '../cost';
import type { EgressAttempt } from '../egress/audit';
import type { ForkedFrom } from '../fork';
import type { Effect, Run, RunState, RunTransition, Snapshot, Task } from '../model';
import type { LeaseRecord } from '../sandbox/lease-records';
import type { Store } from '../store';

/** What `berth show` knows about a run (the CLI's `describeRun`), as the pages use it. */
export interface RunDescription {
  run: Run;
  transitions: RunTransition[];
  tasks: Task[];
  effects: Effect[];
  snapshots: Snapshot[];
  leases: Array<LeaseRecord & { current: boolean; keptBySession: boolean }>;
  egress: { allowed: number; denied: number; attempts?: EgressAttempt[]; dropped: Array<{ proto: string; target: string; count: number }> };
  /** The checkpoint this run was forked from (null for an original run). */
  forkedFrom: ForkedFrom | null;
  /** Runs forked from this one. */
  forks: Array<{ runId: string; state: RunState }>;
  /** Acceptance, apart from the run state (`berth accept/reject`, the acceptance command). */
  acceptance: AcceptanceView;
  /** What the run cost, measured and derived when read. */
  cost: RunCost;
  /** A description of only the newest rows (`describeRun`'s `newest`): whether older tasks, effects or snapshots were left out. */
  shown?: { olderTasks: boolean; olderEffects: boolean; olderSnapshots: boolean };
}

/** A reconcile decision from the page: the same choices as `berth reconcile`. */
export interface ReconcileRequest {
  accept?: boolean;
  rejectEffect?: boolean;
  restore?: string;
  fail?: boolean;
  verify?: boolean;
}

/**
 * The operator's actions, wired by the CLI (the composition root) to the very functions its own
 * commands use, so a click and a command take one code path and record the same actor.
 * Each resolves to a line saying what happened, or throws a BerthError saying why not.
 */
export interface ServeActions {
  approve(runId: string, id: string, digest: string | undefined, actor: string): Promise<string>;
  deny(runId: string, id: string, actor: string): Promise<string>;
  cancel(runId: string, actor: string): Promise<string>;
  reconcile(runId: string, choice: ReconcileRequest, actor: string): Promise<string>;
  /** `berth accept RUN` / `berth reject RUN --reason …` (one shared function). */
  judge(runId: string, decision: 'accepted' | 'rejected', reason: string | undefined, actor: string): Promise<string>;
  /** `berth fork RUN --at SNAPSHOT`, run as a child that drives the fork; resolves once the fork exists. */
  fork(runId: string, snapshotId: string, actor: string): Promise<{ said: string; forkRunId: string | null }>;
}

/** Everything `berth serve` is given. It reads the store only through the Store interface. */
export interface ServeDeps {
  store: Store;
  /** The CLI's `describeRun`. */
  describe(runId: string): Promise<RunDescription>;
  /** Who drives the run, in one line (the CLI's status line). */
  ownerLine(run: Run): Promise<string>;
  actions: ServeActions;
  /** `POST /api/v1/runs`: a plan file on this host submitted for a worker (`berth run PLAN --detach`). */
  submitPlan?(plan: string, o: { requestId?: string; tags: string[] }): Promise<{ run: Run; created: boolean }>;
  /** Reads small files of a snapshot image by content digest, for the snapshot diff's text diff (none: the diff lists paths only). */
  readImageFiles?: ImageFileReader;
  /** Where artifact blobs are read from for download (each streamed with its digest checked). */
  artifacts: ArtifactStore;
  /** The signed-in operator recorded as the actor of every action. */
  operator: string;
  /** The access token; null only on a loopback address (`--no-token`). */
  token: string | null;
  /** Short poll of the commit sequence, ms (default 25). */
  pollMs?: number;
  now?: () => number;
  /** Where an internal error of a request is reported (the page only says 500). */
  logError?: (err: unknown) => void;
}
