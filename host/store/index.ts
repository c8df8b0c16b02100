export type { Store, TaskFilter, RunFilter, EntryFilter, Page, StoredArtifact, SnapshotDelta } from './store';
export type { CommitLogRecords, LoggedCommit } from './commit-log';
export type { RunListQuery, ListedRun, RunListReads } from './run-list';
export { calendarDayStart, dateWindow } from './run-list';
export { pagesOf } from './pages';
export { runNotFound } from './missing-run';
export { nameFromMeta } from './run-list';
export type { OutputRecords, OutputChunk, NewOutputChunk, OutputChannel } from './output';
export type { OwnershipRecords, SessionOwner, ClaimResult, WorkerHost } from './ownership';
export type {
  CommitInput,
  CommitResult,
  CommitConflict,
  FenceRefusal,
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
  NewAcceptance,
  NewArtifact,
} from './commit-input';
export type { AcceptanceReads } from './read-ports';
export type { CostRecords } from './read-ports';
export type { ForkReads } from './read-ports';
export type { RegistryDelete, RegistryDeleteRecords } from './registry-deletes';
export type { ImportedRun, ImportRows, ImportedRunRecords } from './imported';
export { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store';
export type { Durability } from './sqlite/open';
export { storeReadOnly } from './sqlite/read-only';
export { sqliteImagesNamed, sqliteSnapshotsNamed, sqliteStoreIdentity } from './sqlite/identity';
export { openPostgresStore, type PostgresStoreOptions } from './postgres/postgres-store';
export { openStore, isPostgresUrl, lazyPostgresStore } from './open-store';
export { SCHEMA_VERSIONS, NEWEST_SCHEMA_VERSION, type SchemaVersion } from './schema-versions';
