/** Migration 18 in PostgreSQL (see the SQLite text, `IMPORTED_KEYS_MIGRATION`): imported effects, submissions and decisions kept apart. */
export const IMPORTED_KEYS_MIGRATION_PG = `
  CREATE TABLE imported_effects (
    run_id TEXT NOT NULL,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    task_id TEXT,
    kind TEXT NOT NULL,
    intent_json TEXT NOT NULL,
    replay TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    receipt_json TEXT NOT NULL,
    error_json TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, id)
  );
  CREATE INDEX imported_effects_by_task ON imported_effects(task_id);
  CREATE TABLE imported_submissions (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    request_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    input_json TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE TABLE imported_acceptance (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    decision TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT,
    evidence_json TEXT NOT NULL,
    at BIGINT NOT NULL,
    commit_seq BIGINT NOT NULL
  );
  CREATE INDEX imported_acceptance_by_run ON imported_acceptance(run_id, at);
  INSERT INTO imported_effects (run_id, id, session_id, task_id, kind, intent_json, replay, status, attempts, receipt_json, error_json, created_at, updated_at)
    SELECT e.run_id, e.id, e.session_id, e.task_id, e.kind, e.intent_json, e.replay, e.status, e.attempts, e.receipt_json, e.error_json, e.created_at, e.updated_at
    FROM effects e JOIN imported_runs i ON i.run_id = e.run_id AND i.session_id = e.session_id;
  DELETE FROM effects e USING imported_runs i WHERE i.run_id = e.run_id AND i.session_id = e.session_id;
  INSERT INTO imported_submissions (id, session_id, request_id, run_id, input_json, created_at)
    SELECT s.id, s.session_id, s.request_id, s.run_id, s.input_json, s.created_at
    FROM submissions s JOIN imported_runs i ON i.run_id = s.run_id AND i.session_id = s.session_id;
  DELETE FROM submissions s USING imported_runs i WHERE i.run_id = s.run_id AND i.session_id = s.session_id;
  INSERT INTO imported_acceptance (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
    SELECT a.id, a.run_id, a.request_id, a.decision, a.actor, a.reason, a.evidence_json, a.at, a.commit_seq
    FROM acceptance_decisions a JOIN imported_runs i ON i.run_id = a.run_id;
  DELETE FROM acceptance_decisions a USING imported_runs i WHERE i.run_id = a.run_id;
`;
