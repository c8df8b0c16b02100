/**
 * Migration 18 (its own text here, so parallel branches merge cleanly; the lead renumbers): an
 * imported run's effects, submission and acceptance decisions move out of the live tables. Their
 * ids are logical keys there (`getEffect`, `findSubmission`, `findAcceptance` answer by key,
 * store-wide), so an imported row under its original key satisfied, or was taken over by, a live
 * run with the same key. Here they are keyed by the imported run and read only as that run's rows.
 * Rows of imported runs a live run already took over (their run id moved) stay the live run's.
 */
export const IMPORTED_KEYS_MIGRATION = {
  version: 18,
  name: 'imported runs sealed off',
  sql: `
    CREATE TABLE imported_effects (
      run_id TEXT NOT NULL,
      id TEXT NOT NULL,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      task_id TEXT,
      kind TEXT NOT NULL,
      intent_json TEXT NOT NULL,
      replay TEXT NOT NULL,
      status TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      receipt_json TEXT NOT NULL,
      error_json TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (run_id, id)
    ) STRICT;
    CREATE INDEX imported_effects_by_task ON imported_effects(task_id);
    CREATE TABLE imported_submissions (
      id TEXT PRIMARY KEY,
      session_id TEXT NOT NULL REFERENCES sessions(id),
      request_id TEXT NOT NULL,
      run_id TEXT NOT NULL,
      input_json TEXT NOT NULL,
      created_at INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE imported_acceptance (
      id TEXT PRIMARY KEY,
      run_id TEXT NOT NULL,
      request_id TEXT NOT NULL,
      decision TEXT NOT NULL,
      actor TEXT NOT NULL,
      reason TEXT,
      evidence_json TEXT NOT NULL,
      at INTEGER NOT NULL,
      commit_seq INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX imported_acceptance_by_run ON imported_acceptance(run_id, at);
    INSERT INTO imported_effects (run_id, id, session_id, task_id, kind, intent_json, replay, status, attempts, receipt_json, error_json, created_at, updated_at)
      SELECT e.run_id, e.id, e.session_id, e.task_id, e.kind, e.intent_json, e.replay, e.status, e.attempts, e.receipt_json, e.error_json, e.created_at, e.updated_at
      FROM effects e JOIN imported_runs i ON i.run_id = e.run_id AND i.session_id = e.session_id;
    DELETE FROM effects WHERE EXISTS (SELECT 1 FROM imported_runs i WHERE i.run_id = effects.run_id AND i.session_id = effects.session_id);
    INSERT INTO imported_submissions (id, session_id, request_id, run_id, input_json, created_at)
      SELECT s.id, s.session_id, s.request_id, s.run_id, s.input_json, s.created_at
      FROM submissions s JOIN imported_runs i ON i.run_id = s.run_id AND i.session_id = s.session_id;
    DELETE FROM submissions WHERE EXISTS (SELECT 1 FROM imported_runs i WHERE i.run_id = submissions.run_id AND i.session_id = submissions.session_id);
    INSERT INTO imported_acceptance (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
      SELECT a.id, a.run_id, a.request_id, a.decision, a.actor, a.reason, a.evidence_json, a.at, a.commit_seq
      FROM acceptance_decisions a JOIN imported_runs i ON i.run_id = a.run_id;
    DELETE FROM acceptance_decisions WHERE run_id IN (SELECT run_id FROM imported_runs);
  `,
} as const;
