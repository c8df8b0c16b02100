import type { SessionOwner } from './ownership';
import type { AcceptanceDecision, CostSample, Effect, Entry, Run, RunTransition, Session, Snapshot, StoredDocument, Submission, Task } from '../model';
import type { LeaseRecord } from '../model';
import type { EgressAttempt } from '../model';
import type { StoredArtifact } from './store';

/** A run loaded from an exported record: shown and checked, never driven. */
export interface ImportedRun {
  runId: string;
  sessionId: string;
  /** The digest the record carried (and that matched its canonical form). */
  digest: string;
  /** Where the record came from: the exporting store's id and the file. */
  source: string;
  importedAt: number;
  /** The session's owner the record names (the exporting store's claim at export time); null when it names none. */
  owner: SessionOwner | null;
}

/** The rows of one exported run, as the exporting store held them. */
export interface ImportRows {
  digest: string;
  source: string;
  session: Pick<Session, 'id' | 'createdAt' | 'lastSeq' | 'meta'>;
  commits: Array<{ seq: number; at: number; label: string; actor: string }>;
  submission: Submission | null;
  run: Run;
  /** The run the record names as its parent (`run.parentRunId`): the imported run is listed among its forks. */
  forkedFromRunId: string | null;
  transitions: Array<Omit<RunTransition, 'runId'>>;
  tasks: Array<Omit<Task, 'sessionId' | 'runId'>>;
  effects: Array<Omit<Effect, 'sessionId' | 'runId'>>;
  entries: Array<Omit<Entry, 'sessionId' | 'runId'>>;
  documents: Array<Omit<StoredDocument, 'sessionId'>>;
  snapshots: Array<Omit<Snapshot, 'sessionId'>>;
  leases: Array<Omit<LeaseRecord, 'sessionId'>>;
  egress: Array<Omit<EgressAttempt, 'runId'>>;
  /** Decisions as committed (their commit numbers are the exporting session's). */
  acceptance: Array<Omit<AcceptanceDecision, 'runId'>>;
  /** One row per meter, as recorded (not summed: the sum is recomputed by `berth show`). */
  costSamples: Array<{ at: number; meter: keyof CostSample['meters']; key: string; amount: number }>;
  artifacts: Array<Omit<StoredArtifact, 'sessionId' | 'runId'>>;
  /** The session's owner at export time, kept with the import mark (never as a claim of this store). */
  owner: SessionOwner | null;
}

/** The store side of `berth import`. */
export interface ImportedRunRecords {
  /** Writes every row in one transaction; `import_conflict` when the store already holds the session or run. */
  importRun(rows: ImportRows, at: number): Promise<void>;
  getImportedRun(runId: string): Promise<ImportedRun | undefined>;
  listImportedRuns(): Promise<ImportedRun[]>;
  /** True when the session belongs to an imported run: no commit may change it. */
  isImportedSession(sessionId: string): Promise<boolean>;
}
