import type { TaskChanges } from '../commit-input';
import { TASK_COLUMNS } from '../commit-columns';
import { serverNowMs } from '../postgres/server-clock';
import { statement, type Statement } from './transaction';
import { TASK_READ_COLUMNS } from '../task-inputs';

/**
 * Every statement of the commit, SQLite and PostgreSQL side by side, with the same parameters in
 * the same order (SQLite's `?` are positional, so its texts list them in argument order).
 *
 * PostgreSQL's locks stand in for SQLite's single writer (BEGIN IMMEDIATE holds the whole file):
 * the session row `FOR UPDATE` serialises the commits of one session across hosts (the sequence
 * is read and bumped under it); the fencing row `FOR SHARE` makes a claim (which locks it FOR
 * UPDATE) wait for commits that checked the old epoch, while commits under one epoch do not block
 * each other; effect and run rows are locked where they are compare-and-set in code.
 */
export const S = {
  sessionInsert: statement(
    'INSERT INTO sessions (id, created_at, meta_json) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING',
    'INSERT INTO sessions (id, created_at, meta_json) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING',
  ),
  // `imported`: the run of an imported session (read in the same round trip), which no commit may change.
  sessionGet: statement(
    `SELECT s.last_seq, s.entry_seq, (SELECT run_id FROM imported_runs WHERE session_id = s.id LIMIT 1) AS imported
       FROM sessions s WHERE s.id = ?`,
    `SELECT s.last_seq, s.entry_seq, (SELECT run_id FROM imported_runs WHERE session_id = s.id LIMIT 1) AS imported
       FROM sessions s WHERE s.id = $1 FOR UPDATE OF s`,
  ),
  // The fence and the session lock in one round trip (the common, fenced, commit); args: db now, scope, session.
  // `db_now` is the database clock the lease is judged by: SQLite's store clock (given), PostgreSQL's server clock.
  sessionWithFence: statement(
    `SELECT ? AS db_now, f.epoch, f.stopped_at, f.lease_until, s.last_seq, s.entry_seq,
         (SELECT run_id FROM imported_runs WHERE session_id = s.id LIMIT 1) AS imported
       FROM sessions s LEFT JOIN fencing f ON f.scope = ? WHERE s.id = ?`,
    `SELECT ${serverNowMs('$1')} AS db_now, f.epoch, f.stopped_at, f.lease_until, s.last_seq, s.entry_seq,
         (SELECT run_id FROM imported_runs WHERE session_id = s.id LIMIT 1) AS imported
       FROM sessions s LEFT JOIN LATERAL (SELECT epoch, stopped_at, lease_until FROM fencing WHERE scope = $2 FOR SHARE) f ON TRUE
      WHERE s.id = $3 FOR UPDATE OF s`,
  ),
  // No session row: the fence alone, so a stale host still learns it was fenced first.
  fence: statement(
    'SELECT ? AS db_now, epoch, stopped_at, lease_until FROM fencing WHERE scope = ?',
    `SELECT ${serverNowMs('$1')} AS db_now, epoch, stopped_at, lease_until FROM fencing WHERE scope = $2 FOR SHARE`,
  ),
  conversationInsert: statement(
    'INSERT INTO conversations (id, session_id, created_at) VALUES (?, ?, ?)',
    'INSERT INTO conversations (id, session_id, created_at) VALUES ($1, $2, $3)',
  ),
  // A request id seen before writes nothing (two hosts submitting at once: one insert wins).
  submissionInsert: statement(
    'INSERT INTO submissions (id, session_id, request_id, run_id, input_json, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING',
    'INSERT INTO submissions (id, session_id, request_id, run_id, input_json, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (request_id) DO NOTHING',
  ),
  submissionByRequest: statement('SELECT id, run_id FROM submissions WHERE request_id = ?', 'SELECT id, run_id FROM submissions WHERE request_id = $1'),
  runInsert: statement(
    `INSERT INTO runs (id, session_id, submission_id, kind, state, root_task_id, transition_count, versions_json, created_at, updated_at, forked_from_run_id)
     VALUES (?, ?, ?, ?, 'admitted', ?, 1, ?, ?, ?, ?)`,
    `INSERT INTO runs (id, session_id, submission_id, kind, state, root_task_id, transition_count, versions_json, created_at, updated_at, forked_from_run_id)
     VALUES ($1, $2, $3, $4, 'admitted', $5, 1, $6, $7, $8, $9)`,
  ),
  runGet: statement(
    'SELECT state, transition_count, versions_json FROM runs WHERE id = ?',
    'SELECT state, transition_count, versions_json FROM runs WHERE id = $1 FOR UPDATE',
  ),
  runUpdate: statement(
    'UPDATE runs SET state = ?, transition_count = ?, versions_json = ?, updated_at = ? WHERE id = ? AND state = ?',
    'UPDATE runs SET state = $1, transition_count = $2, versions_json = $3, updated_at = $4 WHERE id = $5 AND state = $6',
  ),
  transitionInsert: statement(
    `INSERT INTO run_transitions (run_id, n, at, actor, from_state, to_state, reason, versions_json, commit_seq)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    `INSERT INTO run_transitions (run_id, n, at, actor, from_state, to_state, reason, versions_json, commit_seq)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
  ),
  unresolvedEffects: statement(
    "SELECT id FROM effects WHERE run_id = ? AND status IN ('intended', 'executing', 'unknown') ORDER BY id",
    "SELECT id FROM effects WHERE run_id = $1 AND status IN ('intended', 'executing', 'unknown') ORDER BY id",
  ),
  uncertainEffects: statement(
    "SELECT id FROM effects WHERE run_id = ? AND status IN ('executing', 'unknown') ORDER BY id",
    "SELECT id FROM effects WHERE run_id = $1 AND status IN ('executing', 'unknown') ORDER BY id",
  ),
  waitingOn: statement(
    "SELECT COUNT(*) AS n FROM tasks WHERE run_id = ? AND status = 'waiting' AND json_extract(wait_json, '$.signal') = ?",
    "SELECT COUNT(*) AS n FROM tasks WHERE run_id = $1 AND status = 'waiting' AND (wait_json::jsonb ->> 'signal') = $2",
  ),
  entryInsert: statement(
    `INSERT INTO entries (session_id, seq, id, conversation_id, run_id, task_id, kind, body_json, commit_seq, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    `INSERT INTO entries (session_id, seq, id, conversation_id, run_id, task_id, kind, body_json, commit_seq, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
  ),
  docGet: statement('SELECT version FROM documents WHERE id = ?', 'SELECT version FROM documents WHERE id = $1'),
  docInsert: statement(
    `INSERT INTO documents (id, session_id, run_id, type, version, baseline_version, created_at, updated_at)
     VALUES (?, ?, ?, ?, 0, 0, ?, ?)`,
    `INSERT INTO documents (id, session_id, run_id, type, version, baseline_version, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 0, 0, $5, $6)`,
  ),
  // Under READ COMMITTED a concurrent writer's UPDATE makes this one wait and re-check the version
  // on the row it committed, so exactly one of two racing compare-and-sets matches (tasks alike).
  docBump: statement(
    'UPDATE documents SET version = ?, updated_at = ? WHERE id = ? AND version = ?',
    'UPDATE documents SET version = $1, updated_at = $2 WHERE id = $3 AND version = $4',
  ),
  docBaselineMark: statement('UPDATE documents SET baseline_version = ? WHERE id = ?', 'UPDATE documents SET baseline_version = $1 WHERE id = $2'),
  docBaselineInsert: statement(
    'INSERT INTO document_baselines (document_id, version, state_json) VALUES (?, ?, ?)',
    'INSERT INTO document_baselines (document_id, version, state_json) VALUES ($1, $2, $3)',
  ),
  docOpInsert: statement(
    'INSERT INTO document_ops (document_id, version, op_json, commit_seq) VALUES (?, ?, ?, ?)',
    'INSERT INTO document_ops (document_id, version, op_json, commit_seq) VALUES ($1, $2, $3, $4)',
  ),
  taskInsert: statement(
    `INSERT INTO tasks (id, session_id, run_id, parent_id, kind, kind_version, status, phase, checkpoint_json, input_json, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    `INSERT INTO tasks (id, session_id, run_id, parent_id, kind, kind_version, status, phase, checkpoint_json, input_json, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
  ),
  taskVersion: statement('SELECT version FROM tasks WHERE id = ?', 'SELECT version FROM tasks WHERE id = $1'),
  taskCancel: statement('UPDATE tasks SET cancel_requested = 1, updated_at = ? WHERE id = ?', 'UPDATE tasks SET cancel_requested = 1, updated_at = $1 WHERE id = $2'),
  effectGet: statement(
    'SELECT status, intent_json, attempts, run_id, task_id, attempts_json FROM effects WHERE id = ?',
    'SELECT status, intent_json, attempts, run_id, task_id, attempts_json FROM effects WHERE id = $1 FOR UPDATE',
  ),
  effectInsert: statement(
    `INSERT INTO effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, 'intended', ?, ?)`,
    `INSERT INTO effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'intended', $8, $9)`,
  ),
  effectUpdate: statement(
    `UPDATE effects SET status = COALESCE(?, status), attempts = COALESCE(?, attempts),
       receipt_json = COALESCE(?, receipt_json), error_json = COALESCE(?, error_json), attempts_json = COALESCE(?, attempts_json), updated_at = ? WHERE id = ?`,
    `UPDATE effects SET status = COALESCE($1, status), attempts = COALESCE($2, attempts),
       receipt_json = COALESCE($3, receipt_json), error_json = COALESCE($4, error_json), attempts_json = COALESCE($5, attempts_json), updated_at = $6 WHERE id = $7`,
  ),
  effectFormerRun: statement(
    'INSERT INTO effect_runs (effect_id, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING',
    'INSERT INTO effect_runs (effect_id, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
  ),
  effectOwner: statement(
    'UPDATE effects SET session_id = ?, run_id = ?, task_id = ? WHERE id = ?',
    'UPDATE effects SET session_id = $1, run_id = $2, task_id = $3 WHERE id = $4',
  ),
  snapshotInsert: statement(
    `INSERT INTO snapshots (id, session_id, run_id, task_id, lease_id, image_id, workspace_digest, size_bytes, checkpoint, parent_id, commit_seq, created_at, registry_ref, pushed_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    `INSERT INTO snapshots (id, session_id, run_id, task_id, lease_id, image_id, workspace_digest, size_bytes, checkpoint, parent_id, commit_seq, created_at, registry_ref, pushed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
  ),
  // A request id already recorded is the same decision asked again: nothing written, no conflict.
  acceptanceInsert: statement(
    `INSERT INTO acceptance_decisions (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING`,
    `INSERT INTO acceptance_decisions (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (request_id) DO NOTHING`,
  ),
  artifactInsert: statement(
    `INSERT INTO artifacts (id, session_id, run_id, task_id, step_index, generation, step, path, size_bytes, sha256, snapshot_id, commit_seq, created_at, mode)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    `INSERT INTO artifacts (id, session_id, run_id, task_id, step_index, generation, step, path, size_bytes, sha256, snapshot_id, commit_seq, created_at, mode)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
  ),
  commitInsert: statement(
    'INSERT INTO commits (session_id, seq, at, label, actor) VALUES (?, ?, ?, ?, ?)',
    'INSERT INTO commits (session_id, seq, at, label, actor) VALUES ($1, $2, $3, $4, $5)',
  ),
  sessionBump: statement('UPDATE sessions SET last_seq = ?, entry_seq = ? WHERE id = ?', 'UPDATE sessions SET last_seq = $1, entry_seq = $2 WHERE id = $3'),
  // The store-wide commit order. SQLite: the rowid assigned under the single writer. PostgreSQL:
  // the row goes in unnumbered (`ord` is its insertion order); its readers number committed rows
  // under one advisory lock (postgres/commit-log.ts, schema 20). Numbering here would need a
  // store-wide lock held until COMMIT (schema 12's counter row), which queued every commit of every
  // session behind the one before it, WAL flush included.
  commitLogInsert: statement(
    'INSERT INTO commit_log (session_id, session_seq) VALUES (?, ?)',
    'INSERT INTO commit_log (session_id, session_seq) VALUES ($1, $2)',
  ),
} satisfies Record<string, Statement>;

const taskUpdates = new Map<string, Statement>();

/**
 * The compare-and-set update of a task that sets `keys` (sorted, so one statement per set of
 * fields): the values of `keys`, then updated_at, id and the expected version. It answers the row
 * as written (no row: the version moved on), in the round trip the compare-and-set costs anyway,
 * so the committer knows the row without reading it again.
 */
export function taskUpdate(keys: ReadonlyArray<keyof TaskChanges>): Statement {
  const cacheKey = keys.join(',');
  let s = taskUpdates.get(cacheKey);
  if (!s) {
    const n = keys.length;
    const sqlite = `UPDATE tasks SET ${[...keys.map((k) => `${TASK_COLUMNS[k].column} = ?`), 'version = version + 1', 'updated_at = ?'].join(', ')} WHERE id = ? AND version = ? RETURNING ${TASK_READ_COLUMNS}`;
    const postgres = `UPDATE tasks SET ${[...keys.map((k, i) => `${TASK_COLUMNS[k].column} = $${i + 1}`), 'version = version + 1', `updated_at = $${n + 1}`].join(', ')} WHERE id = $${n + 2} AND version = $${n + 3} RETURNING ${TASK_READ_COLUMNS}`;
    s = statement(sqlite, postgres);
    taskUpdates.set(cacheKey, s);
  }
  return s;
}
