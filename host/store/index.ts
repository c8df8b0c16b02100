export type { Store, TaskFilter, EntryFilter, ExecutionRight } from './store';
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
export { openPostgresStore, type PostgresStoreOptions } from './postgres/postgres-store';
export { openStore, isPostgresUrl, lazyPostgresStore } from './open-store';
export { SCHEMA_VERSIONS, NEWEST_SCHEMA_VERSION, type SchemaVersion } from './schema-versions';
