export type { Store, TaskFilter, EntryFilter, ExecutionRight } from './store';
export type { OwnershipRecords, SessionOwner, ClaimResult, WorkerHost } from './ownership';
export type {
  CommitInput,
  CommitResult,
  CommitConflict,
  NewTask,
  TaskChanges,
  TaskTransitionInput,
  NewRun,
  RunTransitionInput,
  NewEntry,
  DocumentOpInput,
  EffectWrite,
  NewSubmission,
  NewSnapshot,
} from './commit-input';
export { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store';
export type { Durability } from './sqlite/open';
