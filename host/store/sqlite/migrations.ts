/**
 * Append-only: a released migration is never edited or reordered; a change is a new entry.
 * `schema_migrations` records which versions a database has applied.
 */
import { COMMIT_LOG_MIGRATION } from './commit-log';
import { IMPORTED_KEYS_MIGRATION } from './imported-migration';
import { OUTPUT_SQL_SQLITE } from './output';
import { OUTPUT_MIGRATION_NAME } from '../output';

export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: 'kernel objects',
    sql: `
      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        last_seq INTEGER NOT NULL DEFAULT 0,
        entry_seq INTEGER NOT NULL DEFAULT 0,
        meta_json TEXT NOT NULL DEFAULT 'null'
      ) STRICT;
      CREATE TABLE commits (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        label TEXT NOT NULL,
        actor TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      ) STRICT, WITHOUT ROWID;
      CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        created_at INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE submissions (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        request_id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        input_json TEXT NOT NULL,
        created_at INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        submission_id TEXT,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        root_task_id TEXT,
        transition_count INTEGER NOT NULL DEFAULT 0,
        versions_json TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX runs_by_session ON runs(session_id);
      CREATE TABLE run_transitions (
        run_id TEXT NOT NULL REFERENCES runs(id),
        n INTEGER NOT NULL,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        from_state TEXT,
        to_state TEXT NOT NULL,
        reason TEXT NOT NULL,
        versions_json TEXT NOT NULL,
        commit_seq INTEGER NOT NULL,
        PRIMARY KEY (run_id, n)
      ) STRICT, WITHOUT ROWID;
      CREATE TABLE entries (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        id TEXT NOT NULL UNIQUE,
        conversation_id TEXT,
        run_id TEXT,
        task_id TEXT,
        kind TEXT NOT NULL,
        body_json TEXT NOT NULL,
        commit_seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
      ) STRICT;
      CREATE INDEX entries_by_run ON entries(run_id, seq);
      CREATE TRIGGER entries_immutable_update BEFORE UPDATE ON entries
        BEGIN SELECT RAISE(ABORT, 'entries are immutable'); END;
      CREATE TRIGGER entries_immutable_delete BEFORE DELETE ON entries
        BEGIN SELECT RAISE(ABORT, 'entries are immutable'); END;
      CREATE TABLE documents (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        run_id TEXT,
        type TEXT NOT NULL,
        version INTEGER NOT NULL,
        baseline_version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE document_baselines (
        document_id TEXT NOT NULL REFERENCES documents(id),
        version INTEGER NOT NULL,
        state_json TEXT NOT NULL,
        PRIMARY KEY (document_id, version)
      ) STRICT, WITHOUT ROWID;
      CREATE TABLE document_ops (
        document_id TEXT NOT NULL REFERENCES documents(id),
        version INTEGER NOT NULL,
        op_json TEXT NOT NULL,
        commit_seq INTEGER NOT NULL,
        PRIMARY KEY (document_id, version)
      ) STRICT, WITHOUT ROWID;
      CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        run_id TEXT,
        parent_id TEXT,
        kind TEXT NOT NULL,
        kind_version INTEGER NOT NULL,
        status TEXT NOT NULL,
        phase TEXT NOT NULL,
        checkpoint_json TEXT NOT NULL,
        input_json TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        restarts INTEGER NOT NULL DEFAULT 0,
        wait_json TEXT,
        wake_at INTEGER,
        outcome TEXT,
        result_json TEXT NOT NULL DEFAULT 'null',
        error_json TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        blocked_reason TEXT,
        version INTEGER NOT NULL DEFAULT 1,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX tasks_by_run ON tasks(run_id);
      CREATE INDEX tasks_by_parent ON tasks(parent_id);
      CREATE INDEX tasks_active ON tasks(status) WHERE status <> 'terminal';
      CREATE TABLE effects (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        run_id TEXT,
        task_id TEXT,
        kind TEXT NOT NULL,
        intent_json TEXT NOT NULL,
        replay TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        receipt_json TEXT NOT NULL DEFAULT 'null',
        error_json TEXT NOT NULL DEFAULT 'null',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX effects_by_run ON effects(run_id);
      CREATE TABLE fencing (
        scope TEXT PRIMARY KEY,
        epoch INTEGER NOT NULL,
        holder TEXT NOT NULL,
        at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 2,
    name: 'sandbox leases and sweeps',
    sql: `
      CREATE TABLE leases (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        host_id TEXT NOT NULL,
        container_id TEXT NOT NULL,
        image_digest TEXT NOT NULL,
        env_fingerprint TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        released_at INTEGER
      ) STRICT;
      CREATE INDEX leases_by_host ON leases(host_id);
      CREATE INDEX leases_by_session ON leases(session_id);
      CREATE TABLE sweeps (
        container_id TEXT NOT NULL,
        lease_id TEXT,
        host_id TEXT NOT NULL,
        reason TEXT NOT NULL,
        at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 3,
    name: 'snapshots and workspace manifests',
    sql: `
      CREATE TABLE snapshots (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        run_id TEXT,
        task_id TEXT,
        lease_id TEXT NOT NULL,
        image_id TEXT NOT NULL,
        workspace_digest TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        checkpoint TEXT NOT NULL,
        parent_id TEXT,
        commit_seq INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        pruned_at INTEGER
      ) STRICT;
      CREATE INDEX snapshots_by_run ON snapshots(run_id, commit_seq);
      CREATE INDEX snapshots_by_session ON snapshots(session_id, commit_seq);
      CREATE TABLE workspace_manifests (
        image_id TEXT PRIMARY KEY,
        manifest_json TEXT NOT NULL,
        created_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 4,
    name: 'egress audit',
    sql: `
      CREATE TABLE egress_attempts (
        at INTEGER NOT NULL,
        run_id TEXT,
        lease_id TEXT,
        method TEXT NOT NULL,
        target TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
        reason TEXT NOT NULL,
        bytes_out INTEGER NOT NULL,
        bytes_in INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX egress_by_run ON egress_attempts(run_id, at);
      CREATE INDEX egress_by_lease ON egress_attempts(lease_id, at);
    `,
  },
  {
    version: 5,
    name: 'egress attempt counts',
    // Packets the sandbox's network rules drop are recorded per target and window, not one row each.
    sql: `ALTER TABLE egress_attempts ADD COLUMN count INTEGER NOT NULL DEFAULT 1;`,
  },
  {
    version: 6,
    name: 'store identity',
    // A random id per store file: containers, networks and rules carry it, so two stores on one
    // machine (same host id) never sweep each other's sandboxes.
    sql: `
      CREATE TABLE store_identity (id TEXT NOT NULL) STRICT;
      INSERT INTO store_identity (id) VALUES ('store_' || lower(hex(randomblob(8))));
    `,
  },
  {
    version: 7,
    name: 'lease intents name their run',
    // A lease is recorded (container_id '' until the container exists) before its container is
    // created, with the run it serves, so a later host finds and releases what a killed one leased.
    sql: `
      ALTER TABLE leases ADD COLUMN run_id TEXT;
      CREATE INDEX leases_by_run ON leases(run_id);
    `,
  },
  {
    version: 8,
    name: 'host heartbeat',
    // The holder of a fencing scope says it is alive (and which process it is) so that status can
    // tell a run a host drives from a run nothing drives; stopped_at is set by a clean stop.
    sql: `
      ALTER TABLE fencing ADD COLUMN pid INTEGER;
      ALTER TABLE fencing ADD COLUMN heartbeat_at INTEGER;
      ALTER TABLE fencing ADD COLUMN stopped_at INTEGER;
    `,
  },
  {
    version: 9,
    name: 'snapshot pushes',
    // A snapshot pushed to an OCI registry names its manifest (`repo@sha256:…`), so an engine that
    // never saw its image pulls it by digest; pushed_at is when the registry acknowledged it.
    sql: `
      ALTER TABLE snapshots ADD COLUMN registry_ref TEXT;
      ALTER TABLE snapshots ADD COLUMN pushed_at INTEGER;
    `,
  },
  {
    version: 10,
    name: 'acceptance and cost',
    // Acceptance decisions are committed (their commit_seq ties them to the commit log); the
    // request id makes a retried accept/reject the same decision. Cost samples are observations
    // written as they are measured, one row per meter, summed at read time.
    sql: `
      CREATE TABLE acceptance_decisions (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        request_id TEXT NOT NULL UNIQUE,
        decision TEXT NOT NULL CHECK (decision IN ('accepted', 'rejected')),
        actor TEXT NOT NULL,
        reason TEXT,
        evidence_json TEXT NOT NULL,
        at INTEGER NOT NULL,
        commit_seq INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX acceptance_by_run ON acceptance_decisions(run_id, at);
      CREATE TABLE cost_samples (
        run_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        meter TEXT NOT NULL,
        meter_key TEXT NOT NULL,
        amount INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX cost_by_run ON cost_samples(run_id, meter);
    `,
  },
  {
    version: 11,
    name: 'step artifacts',
    // Files a step declared, copied into the content-addressed artifact store and committed with
    // the step's result; (run_id, step_index, generation) names the execution that made them.
    sql: `
      CREATE TABLE artifacts (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        task_id TEXT,
        step_index INTEGER NOT NULL,
        generation INTEGER NOT NULL,
        step TEXT NOT NULL,
        path TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        snapshot_id TEXT,
        commit_seq INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX artifacts_by_run ON artifacts(run_id, step_index, generation);
    `,
  },
  COMMIT_LOG_MIGRATION,
  {
    version: 13,
    name: 'imported runs',
    // A run loaded by `berth import` from an exported record: its rows are as the exporting store
    // held them; this row marks its session read-only (shown and checked, never driven).
    sql: `
      CREATE TABLE imported_runs (
        run_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        record_digest TEXT NOT NULL,
        source TEXT NOT NULL,
        imported_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX imported_runs_by_session ON imported_runs(session_id);
      -- berth check --all reads every run's documents: without it each read scans them all.
      CREATE INDEX documents_by_run ON documents(run_id);
    `,
  },
  {
    version: 14,
    name: 'run ownership and workers',
    // Per-session ownership rows live in `fencing` (scope "session:<id>") so that commit()'s fence
    // check covers them unchanged; lease_until (database clock) says until when the owner's claim
    // holds without a heartbeat. `hosts` is what `berth workers` lists: one row per worker process.
    sql: `
      ALTER TABLE fencing ADD COLUMN lease_until INTEGER;
      CREATE TABLE hosts (
        id TEXT PRIMARY KEY,
        host_id TEXT NOT NULL,
        pid INTEGER,
        tags TEXT NOT NULL,
        concurrency INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        heartbeat_at INTEGER NOT NULL,
        stopped_at INTEGER
      ) STRICT;
    `,
  },
  {
    version: 15,
    name: 'snapshot deltas',
    // A small snapshot is a layer tar the host built itself, kept here until the engine has loaded
    // it (issue 14): the record can name its image before the engine holds it.
    sql: `
      CREATE TABLE snapshot_deltas (
        image_id TEXT PRIMARY KEY,
        parent_image_id TEXT NOT NULL,
        snapshot_id TEXT NOT NULL,
        config BLOB NOT NULL,
        layer BLOB NOT NULL,
        created_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 16,
    name: 'run parent',
    // A run's forks were found by reading every run's root input (O(runs) per `berth show`); the
    // parent is now a column the submit fills, looked up by index. Existing runs get it from
    // where Berth recorded it: a plan run's root input `fork.runId`, and for a forked agent
    // session its meta `forkedFrom.runId` on the session's first agent run (in listRuns order).
    sql: `
      ALTER TABLE runs ADD COLUMN forked_from_run_id TEXT;
      UPDATE runs SET forked_from_run_id = (SELECT json_extract(t.input_json, '$.fork.runId') FROM tasks t WHERE t.id = runs.root_task_id)
        WHERE kind = 'plan' AND root_task_id IS NOT NULL;
      UPDATE runs SET forked_from_run_id = (SELECT json_extract(s.meta_json, '$.forkedFrom.runId') FROM sessions s WHERE s.id = runs.session_id)
        WHERE kind = 'agent'
          AND id = (SELECT r2.id FROM runs r2 WHERE r2.session_id = runs.session_id AND r2.kind = 'agent' ORDER BY r2.created_at, r2.id LIMIT 1);
      CREATE INDEX runs_by_fork ON runs(forked_from_run_id);
    `,
  },
  {
    version: 17,
    name: 'registry manifest deletions',
    // A pruned snapshot's manifest deleted from its registry (DELETE by digest). What is still to
    // delete is derived from the snapshot records; this says what was done, so gc never asks twice.
    sql: `
      CREATE TABLE registry_deletes (
        registry_ref TEXT PRIMARY KEY,
        deleted_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  IMPORTED_KEYS_MIGRATION,
  {
    version: 19,
    name: 'lease epoch, imported owner',
    // The ownership epoch a sandbox is held under: set at lease (as the berth.epoch label is) and
    // raised when a new owner adopts the sandbox after stopping every command an older epoch
    // started in it. Labels cannot change, so the record says which owner may use it now.
    // An imported run keeps the owner its record names (the exporting store's claim), apart from
    // `fencing`, where it would read as a claim of this store.
    sql: `
      ALTER TABLE leases ADD COLUMN epoch INTEGER;
      ALTER TABLE imported_runs ADD COLUMN owner_json TEXT;
    `,
  },
  {
    version: 20,
    name: 'commit order numbered by its readers (PostgreSQL)',
    // PostgreSQL's commits no longer number the store-wide order under one counter row (see
    // postgres/commit-log.ts); SQLite's single writer still numbers it by rowid, so nothing changes here.
    sql: 'SELECT 1;',
  },
  {
    version: 21,
    name: 'worker report, drain request',
    // What a worker says of itself at each heartbeat (slots in use, runs it leaves and why), and an
    // operator's request that it drain (berth drain), which the worker reads at its next round.
    sql: `
      ALTER TABLE hosts ADD COLUMN report_json TEXT;
      ALTER TABLE hosts ADD COLUMN drain_requested_at INTEGER;
    `,
  },
  {
    version: 22,
    name: 'effect attempts, egress recorded at start',
    // Each effect keeps its attempts (run, task, owner epoch, start, end, outcome, how it was
    // settled) as JSON the commit rewrites under the effect's row lock. A logical effect attempted
    // afresh by a later run moves to it (its uncertainty is that run's), and the runs that attempted
    // it before are kept in effect_runs, so their records still hold the effect their failure came from.
    // An allowed egress request is a row from its start (attempt_id, no ended_at) completed when it ends.
    sql: `
      ALTER TABLE effects ADD COLUMN attempts_json TEXT;
      ALTER TABLE imported_effects ADD COLUMN attempts_json TEXT;
      CREATE TABLE effect_runs (
        effect_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        PRIMARY KEY (effect_id, run_id)
      ) STRICT;
      CREATE INDEX effect_runs_by_run ON effect_runs(run_id);
      ALTER TABLE egress_attempts ADD COLUMN attempt_id TEXT;
      ALTER TABLE egress_attempts ADD COLUMN ended_at INTEGER;
      CREATE UNIQUE INDEX egress_by_attempt ON egress_attempts(attempt_id);
    `,
  },
  // Live output of steps and tool calls, written while they run (host/output): see sqlite/output.ts.
  { version: 23, name: OUTPUT_MIGRATION_NAME, sql: OUTPUT_SQL_SQLITE },
  {
    version: 24,
    name: 'artifact file mode',
    // The permission bits a step's artifact had in the sandbox, so `berth artifacts --out` writes a
    // fetched test binary executable again. Null for artifacts committed before this version.
    sql: 'ALTER TABLE artifacts ADD COLUMN mode INTEGER;',
  },
  {
    version: 25,
    name: 'runs by session in creation order',
    // Every agent message and MCP call is a run of its session: "the session's newest run" is read
    // on each call, and by this index it is one row whatever the session's length.
    sql: 'DROP INDEX runs_by_session; CREATE INDEX runs_by_session ON runs(session_id, created_at, id);',
  },
];
