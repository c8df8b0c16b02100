/**
 * The PostgreSQL text of each schema version, keyed by the version number of the one list in
 * `../schema-versions.ts`. Append-only like the SQLite list: a released version is never edited.
 *
 * Dialect notes (why these differ from the SQLite text): every integer is BIGINT (epoch
 * milliseconds do not fit INTEGER; the pool parses int8 back to a JS number); tables whose reads
 * order by SQLite's `rowid` get an identity column `ord` instead; triggers need a function.
 */
import { COMMIT_LOG_NUMBERED_BY_READERS_PG } from './commit-log-migration';
import { IMPORTED_KEYS_MIGRATION_PG } from './imported-migration';
import { OUTPUT_SQL_POSTGRES } from './output';

export const POSTGRES_SQL: Readonly<Record<number, string>> = {
  1: `
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY,
      created_at BIGINT NOT NULL,
      last_seq BIGINT NOT NULL DEFAULT 0,
      entry_seq BIGINT NOT NULL DEFAULT 0,
      meta_json TEXT NOT NULL DEFAULT 'null'
    );
    CREATE TABLE commits (
      session_id TEXT NOT NULL REFERENCES sessions(id),
      seq BIGINT NOT NULL,
      at BIGINT NOT NULL,
      label TEXT NOT NULL,
      actor TEXT NOT NULL,
      PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE conversations (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      created_at BIGINT NOT NULL
    );
    CREATE TABLE submissions (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      request_id TEXT NOT NULL UNIQUE,
      run_id TEXT NOT NULL,
      input_json TEXT NOT NULL,
      created_at BIGINT NOT NULL
    );
    CREATE TABLE runs (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      submission_id TEXT,
      kind TEXT NOT NULL,
      state TEXT NOT NULL,
      root_task_id TEXT,
      transition_count BIGINT NOT NULL DEFAULT 0,
      versions_json TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    );
    CREATE INDEX runs_by_session ON runs(session_id);
    CREATE TABLE run_transitions (
      run_id TEXT NOT NULL REFERENCES runs(id),
      n BIGINT NOT NULL,
      at BIGINT NOT NULL,
      actor TEXT NOT NULL,
      from_state TEXT,
      to_state TEXT NOT NULL,
      reason TEXT NOT NULL,
      versions_json TEXT NOT NULL,
      commit_seq BIGINT NOT NULL,
      PRIMARY KEY (run_id, n)
    );
    CREATE TABLE entries (
      session_id TEXT NOT NULL REFERENCES sessions(id),
      seq BIGINT NOT NULL,
      id TEXT NOT NULL UNIQUE,
      conversation_id TEXT,
      run_id TEXT,
      task_id TEXT,
      kind TEXT NOT NULL,
      body_json TEXT NOT NULL,
      commit_seq BIGINT NOT NULL,
      at BIGINT NOT NULL,
      PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX entries_by_run ON entries(run_id, seq);
    CREATE FUNCTION entries_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'entries are immutable'; END; $$;
    CREATE TRIGGER entries_immutable_update BEFORE UPDATE ON entries FOR EACH ROW EXECUTE FUNCTION entries_immutable();
    CREATE TRIGGER entries_immutable_delete BEFORE DELETE ON entries FOR EACH ROW EXECUTE FUNCTION entries_immutable();
    CREATE TABLE documents (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      run_id TEXT,
      type TEXT NOT NULL,
      version BIGINT NOT NULL,
      baseline_version BIGINT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    );
    CREATE TABLE document_baselines (
      document_id TEXT NOT NULL REFERENCES documents(id),
      version BIGINT NOT NULL,
      state_json TEXT NOT NULL,
      PRIMARY KEY (document_id, version)
    );
    CREATE TABLE document_ops (
      document_id TEXT NOT NULL REFERENCES documents(id),
      version BIGINT NOT NULL,
      op_json TEXT NOT NULL,
      commit_seq BIGINT NOT NULL,
      PRIMARY KEY (document_id, version)
    );
    CREATE TABLE tasks (
      ord BIGINT GENERATED ALWAYS AS IDENTITY,
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      run_id TEXT,
      parent_id TEXT,
      kind TEXT NOT NULL,
      kind_version BIGINT NOT NULL,
      status TEXT NOT NULL,
      phase TEXT NOT NULL,
      checkpoint_json TEXT NOT NULL,
      input_json TEXT NOT NULL,
      attempts BIGINT NOT NULL DEFAULT 0,
      restarts BIGINT NOT NULL DEFAULT 0,
      wait_json TEXT,
      wake_at BIGINT,
      outcome TEXT,
      result_json TEXT NOT NULL DEFAULT 'null',
      error_json TEXT,
      cancel_requested BIGINT NOT NULL DEFAULT 0,
      blocked_reason TEXT,
      version BIGINT NOT NULL DEFAULT 1,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    );
    CREATE INDEX tasks_by_run ON tasks(run_id);
    CREATE INDEX tasks_by_parent ON tasks(parent_id);
    CREATE INDEX tasks_active ON tasks(status) WHERE status <> 'terminal';
    CREATE INDEX tasks_by_ord ON tasks(ord);
    CREATE TABLE effects (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      run_id TEXT,
      task_id TEXT,
      kind TEXT NOT NULL,
      intent_json TEXT NOT NULL,
      replay TEXT NOT NULL,
      status TEXT NOT NULL,
      attempts BIGINT NOT NULL DEFAULT 0,
      receipt_json TEXT NOT NULL DEFAULT 'null',
      error_json TEXT NOT NULL DEFAULT 'null',
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    );
    CREATE INDEX effects_by_run ON effects(run_id);
    CREATE TABLE fencing (
      scope TEXT PRIMARY KEY,
      epoch BIGINT NOT NULL,
      holder TEXT NOT NULL,
      at BIGINT NOT NULL
    );
  `,
  2: `
    CREATE TABLE leases (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL,
      host_id TEXT NOT NULL,
      container_id TEXT NOT NULL,
      image_digest TEXT NOT NULL,
      env_fingerprint TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      released_at BIGINT
    );
    CREATE INDEX leases_by_host ON leases(host_id);
    CREATE INDEX leases_by_session ON leases(session_id);
    CREATE TABLE sweeps (
      ord BIGINT GENERATED ALWAYS AS IDENTITY,
      container_id TEXT NOT NULL,
      lease_id TEXT,
      host_id TEXT NOT NULL,
      reason TEXT NOT NULL,
      at BIGINT NOT NULL
    );
  `,
  3: `
    CREATE TABLE snapshots (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      run_id TEXT,
      task_id TEXT,
      lease_id TEXT NOT NULL,
      image_id TEXT NOT NULL,
      workspace_digest TEXT NOT NULL,
      size_bytes BIGINT NOT NULL,
      checkpoint TEXT NOT NULL,
      parent_id TEXT,
      commit_seq BIGINT NOT NULL,
      created_at BIGINT NOT NULL,
      pruned_at BIGINT
    );
    CREATE INDEX snapshots_by_run ON snapshots(run_id, commit_seq);
    CREATE INDEX snapshots_by_session ON snapshots(session_id, commit_seq);
    CREATE TABLE workspace_manifests (
      image_id TEXT PRIMARY KEY,
      manifest_json TEXT NOT NULL,
      created_at BIGINT NOT NULL
    );
  `,
  4: `
    CREATE TABLE egress_attempts (
      ord BIGINT GENERATED ALWAYS AS IDENTITY,
      at BIGINT NOT NULL,
      run_id TEXT,
      lease_id TEXT,
      method TEXT NOT NULL,
      target TEXT NOT NULL,
      decision TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
      reason TEXT NOT NULL,
      bytes_out BIGINT NOT NULL,
      bytes_in BIGINT NOT NULL
    );
    CREATE INDEX egress_by_run ON egress_attempts(run_id, at);
    CREATE INDEX egress_by_lease ON egress_attempts(lease_id, at);
  `,
  5: `ALTER TABLE egress_attempts ADD COLUMN count BIGINT NOT NULL DEFAULT 1;`,
  6: `
    CREATE TABLE store_identity (id TEXT NOT NULL);
    INSERT INTO store_identity (id) VALUES ('store_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16));
  `,
  7: `
    ALTER TABLE leases ADD COLUMN run_id TEXT;
    CREATE INDEX leases_by_run ON leases(run_id);
  `,
  8: `
    ALTER TABLE fencing ADD COLUMN pid BIGINT;
    ALTER TABLE fencing ADD COLUMN heartbeat_at BIGINT;
    ALTER TABLE fencing ADD COLUMN stopped_at BIGINT;
  `,
  9: `
    ALTER TABLE snapshots ADD COLUMN registry_ref TEXT;
    ALTER TABLE snapshots ADD COLUMN pushed_at BIGINT;
  `,
  10: `
    CREATE TABLE acceptance_decisions (
      id TEXT PRIMARY KEY,
      run_id TEXT NOT NULL,
      request_id TEXT NOT NULL UNIQUE,
      decision TEXT NOT NULL CHECK (decision IN ('accepted', 'rejected')),
      actor TEXT NOT NULL,
      reason TEXT,
      evidence_json TEXT NOT NULL,
      at BIGINT NOT NULL,
      commit_seq BIGINT NOT NULL
    );
    CREATE INDEX acceptance_by_run ON acceptance_decisions(run_id, at);
    CREATE TABLE cost_samples (
      ord BIGINT GENERATED ALWAYS AS IDENTITY,
      run_id TEXT NOT NULL,
      at BIGINT NOT NULL,
      meter TEXT NOT NULL,
      meter_key TEXT NOT NULL,
      amount BIGINT NOT NULL
    );
    CREATE INDEX cost_by_run ON cost_samples(run_id, meter);
  `,
  11: `
    CREATE TABLE artifacts (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL,
      run_id TEXT NOT NULL,
      task_id TEXT,
      step_index BIGINT NOT NULL,
      generation BIGINT NOT NULL,
      step TEXT NOT NULL,
      path TEXT NOT NULL,
      size_bytes BIGINT NOT NULL,
      sha256 TEXT NOT NULL,
      snapshot_id TEXT,
      commit_seq BIGINT NOT NULL,
      created_at BIGINT NOT NULL
    );
    CREATE INDEX artifacts_by_run ON artifacts(run_id, step_index, generation);
  `,
  // The store-wide commit order. SQLite numbers it by its single writer; here concurrent commits
  // of different sessions run at once, so an identity column could hand seq N+1 to a transaction
  // that commits before the one holding N, and a reader that saw N+1 would skip N for ever. The
  // one-row counter is bumped by each commit's last statement and its row lock is held until that
  // COMMIT: numbers are taken in commit order, gap-free (a rolled-back bump is undone with it).
  // Existing commits are numbered by time, as in SQLite.
  12: `
    CREATE TABLE commit_log (
      seq BIGINT PRIMARY KEY,
      session_id TEXT NOT NULL,
      session_seq BIGINT NOT NULL,
      UNIQUE (session_id, session_seq)
    );
    INSERT INTO commit_log (seq, session_id, session_seq)
      SELECT row_number() OVER (ORDER BY at, session_id, seq), session_id, seq FROM commits;
    CREATE TABLE commit_log_counter (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), seq BIGINT NOT NULL);
    INSERT INTO commit_log_counter (one, seq) SELECT TRUE, COALESCE(MAX(seq), 0) FROM commit_log;
  `,
  13: `
    CREATE TABLE imported_runs (
      run_id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL,
      record_digest TEXT NOT NULL,
      source TEXT NOT NULL,
      imported_at BIGINT NOT NULL
    );
    CREATE INDEX imported_runs_by_session ON imported_runs(session_id);
    CREATE INDEX documents_by_run ON documents(run_id);
  `,
  14: `
    ALTER TABLE fencing ADD COLUMN lease_until BIGINT;
    CREATE TABLE hosts (
      id TEXT PRIMARY KEY,
      host_id TEXT NOT NULL,
      pid BIGINT,
      tags TEXT NOT NULL,
      concurrency BIGINT NOT NULL,
      started_at BIGINT NOT NULL,
      heartbeat_at BIGINT NOT NULL,
      stopped_at BIGINT
    );
  `,
  15: `
    CREATE TABLE snapshot_deltas (
      image_id TEXT PRIMARY KEY,
      parent_image_id TEXT NOT NULL,
      snapshot_id TEXT NOT NULL,
      config BYTEA NOT NULL,
      layer BYTEA NOT NULL,
      created_at BIGINT NOT NULL
    );
  `,
  // The run's parent as a column (see the SQLite text); the backfill reads the same JSON with
  // jsonb operators (`->` on a non-object gives NULL, as json_extract does).
  16: `
    ALTER TABLE runs ADD COLUMN forked_from_run_id TEXT;
    UPDATE runs SET forked_from_run_id = t.input_json::jsonb -> 'fork' ->> 'runId'
      FROM tasks t WHERE t.id = runs.root_task_id AND runs.kind = 'plan';
    UPDATE runs SET forked_from_run_id = s.meta_json::jsonb -> 'forkedFrom' ->> 'runId'
      FROM sessions s
      WHERE s.id = runs.session_id AND runs.kind = 'agent'
        AND runs.id = (SELECT r2.id FROM runs r2 WHERE r2.session_id = runs.session_id AND r2.kind = 'agent' ORDER BY r2.created_at, r2.id LIMIT 1);
    CREATE INDEX runs_by_fork ON runs(forked_from_run_id);
  `,
  17: `
    CREATE TABLE registry_deletes (
      registry_ref TEXT PRIMARY KEY,
      deleted_at BIGINT NOT NULL
    );
  `,
  18: IMPORTED_KEYS_MIGRATION_PG,
  // The ownership epoch a sandbox is held under (see the SQLite text).
  19: `
    ALTER TABLE leases ADD COLUMN epoch BIGINT;
    ALTER TABLE imported_runs ADD COLUMN owner_json TEXT;
  `,
  20: COMMIT_LOG_NUMBERED_BY_READERS_PG,
  // A worker's report and an operator's drain request (see the SQLite text).
  21: `
    ALTER TABLE hosts ADD COLUMN report_json TEXT;
    ALTER TABLE hosts ADD COLUMN drain_requested_at BIGINT;
  `,
  // Effect attempts and the earlier runs of a moved effect; egress rows from a request's start (see the SQLite text).
  22: `
    ALTER TABLE effects ADD COLUMN attempts_json TEXT;
    ALTER TABLE imported_effects ADD COLUMN attempts_json TEXT;
    CREATE TABLE effect_runs (
      effect_id TEXT NOT NULL,
      run_id TEXT NOT NULL,
      PRIMARY KEY (effect_id, run_id)
    );
    CREATE INDEX effect_runs_by_run ON effect_runs(run_id);
    ALTER TABLE egress_attempts ADD COLUMN attempt_id TEXT;
    ALTER TABLE egress_attempts ADD COLUMN ended_at BIGINT;
    CREATE UNIQUE INDEX egress_by_attempt ON egress_attempts(attempt_id);
  `,
  // Live output of steps and tool calls (see postgres/output.ts).
  23: OUTPUT_SQL_POSTGRES,
  // An artifact's permission bits in the sandbox (see the SQLite text).
  24: 'ALTER TABLE artifacts ADD COLUMN mode INTEGER;',
  // A session's runs in creation order, by index (see the SQLite text).
  25: 'DROP INDEX runs_by_session; CREATE INDEX runs_by_session ON runs(session_id, created_at, id);',
};
