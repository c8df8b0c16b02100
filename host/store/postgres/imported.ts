import type pg from 'pg';
import { importConflict, importKeys, isUniqueViolation, judgeImportKeys } from '../import-keys';
import type { ImportedRunRecords, ImportRows } from '../imported';
import { toImported } from '../sqlite/imported';
import { query, transaction, type Queryable, type Row } from './open';
import { json, toSnapshot } from './rows';

/** The imported rows the ordinary reads add to a run's (or task's) own, never found by key (see the SQLite twin). */
export function postgresImportedReads(pool: pg.Pool) {
  return {
    async effects(f: { runId?: string; taskId?: string }): Promise<Row[]> {
      if (f.runId && f.taskId) return query(pool, 'SELECT * FROM imported_effects WHERE run_id = $1 AND task_id = $2 ORDER BY created_at, id', [f.runId, f.taskId]);
      if (f.runId) return query(pool, 'SELECT * FROM imported_effects WHERE run_id = $1 ORDER BY created_at, id', [f.runId]);
      if (f.taskId) return query(pool, 'SELECT * FROM imported_effects WHERE task_id = $1 ORDER BY created_at, id', [f.taskId]);
      return query(pool, 'SELECT * FROM imported_effects ORDER BY created_at, id');
    },
    async submission(id: string): Promise<Row | undefined> {
      return (await query(pool, 'SELECT * FROM imported_submissions WHERE id = $1', [id]))[0];
    },
    async acceptance(f: { runId?: string }): Promise<Row[]> {
      return f.runId
        ? query(pool, 'SELECT * FROM imported_acceptance WHERE run_id = $1 ORDER BY at, commit_seq, id', [f.runId])
        : query(pool, 'SELECT * FROM imported_acceptance ORDER BY at, commit_seq, id');
    },
  };
}

/** Which of `ids` the tables hold, and the store's rows of the record's snapshots (inside the import's transaction). */
async function heldKeys(db: Queryable, r: ImportRows) {
  const inUse = new Map<string, string[]>();
  for (const k of importKeys(r)) {
    const found = new Set<string>();
    if (k.ids.length) for (const t of k.tables) for (const row of await query(db, `SELECT id FROM ${t} WHERE id = ANY($1::text[])`, [k.ids])) found.add(row.id as string);
    inUse.set(k.what, [...found]);
  }
  const snapshots = r.snapshots.length
    ? (await query(db, 'SELECT s.*, EXISTS (SELECT 1 FROM imported_runs i WHERE i.session_id = s.session_id) AS imported FROM snapshots s WHERE s.id = ANY($1::text[])', [r.snapshots.map((x) => x.id)]))
        .map((row) => ({ snapshot: toSnapshot(row), imported: row.imported === true }))
    : [];
  return { inUse, snapshots };
}

const S = {
  mark: 'INSERT INTO imported_runs (run_id, session_id, record_digest, source, imported_at, owner_json) VALUES ($1, $2, $3, $4, $5, $6)',
  session: 'INSERT INTO sessions (id, created_at, last_seq, entry_seq, meta_json) VALUES ($1, $2, $3, $4, $5)',
  commit: 'INSERT INTO commits (session_id, seq, at, label, actor) VALUES ($1, $2, $3, $4, $5)',
  submission: 'INSERT INTO imported_submissions (id, session_id, request_id, run_id, input_json, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
  run: `INSERT INTO runs (id, session_id, submission_id, kind, state, root_task_id, transition_count, versions_json, created_at, updated_at, forked_from_run_id)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
  transition: `INSERT INTO run_transitions (run_id, n, at, actor, from_state, to_state, reason, versions_json, commit_seq)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
  task: `INSERT INTO tasks (id, session_id, run_id, parent_id, kind, kind_version, status, phase, checkpoint_json, input_json, attempts, restarts,
           wait_json, wake_at, outcome, result_json, error_json, cancel_requested, blocked_reason, version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`,
  effect: `INSERT INTO imported_effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, attempts, receipt_json, error_json, created_at, updated_at, attempts_json)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
  entry: `INSERT INTO entries (session_id, seq, id, conversation_id, run_id, task_id, kind, body_json, commit_seq, at)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
  document: 'INSERT INTO documents (id, session_id, run_id, type, version, baseline_version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
  baseline: 'INSERT INTO document_baselines (document_id, version, state_json) VALUES ($1, $2, $3)',
  op: 'INSERT INTO document_ops (document_id, version, op_json, commit_seq) VALUES ($1, $2, $3, $4)',
  snapshot: `INSERT INTO snapshots (id, session_id, run_id, task_id, lease_id, image_id, workspace_digest, size_bytes, checkpoint, parent_id, commit_seq, created_at, pruned_at, registry_ref, pushed_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
  lease: `INSERT INTO leases (id, session_id, host_id, container_id, image_digest, env_fingerprint, created_at, expires_at, released_at, run_id, epoch)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
  egress: `INSERT INTO egress_attempts (at, run_id, lease_id, method, target, decision, reason, bytes_out, bytes_in, count, attempt_id, ended_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
  acceptance: `INSERT INTO imported_acceptance (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
  cost: 'INSERT INTO cost_samples (run_id, at, meter, meter_key, amount) VALUES ($1, $2, $3, $4, $5)',
  artifact: `INSERT INTO artifacts (id, session_id, run_id, task_id, step_index, generation, step, path, size_bytes, sha256, snapshot_id, commit_seq, created_at, mode)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
};

/**
 * Imported runs (see the SQLite twin): every row in one transaction, exactly as the exporting
 * store held them, plus the `imported_runs` row that marks the session read-only.
 */
export function postgresImportedRuns(pool: pg.Pool, location: string): ImportedRunRecords {
  async function write(db: pg.PoolClient, r: ImportRows, at: number): Promise<void> {
    const q = (sql: string, args: unknown[]) => query(db, sql, args);
    const { run, session } = r;
    const held = await heldKeys(db, r);
    const shared = judgeImportKeys(r, location, held.inUse, held.snapshots);
    const sid = session.id;
    await q(S.session, [sid, session.createdAt, session.lastSeq, r.entries.reduce((m, e) => Math.max(m, e.seq), 0), json(session.meta)]);
    for (const c of r.commits) await q(S.commit, [sid, c.seq, c.at, c.label, c.actor]);
    if (r.submission) await q(S.submission, [r.submission.id, sid, r.submission.requestId, r.submission.runId, json(r.submission.input), r.submission.createdAt]);
    await q(S.run, [run.id, sid, run.submissionId, run.kind, run.state, run.rootTaskId, run.transitionCount, json(run.versions), run.createdAt, run.updatedAt, r.forkedFromRunId]);
    for (const t of r.transitions) await q(S.transition, [run.id, t.n, t.at, t.actor, t.from, t.to, t.reason, json(t.versions), t.commitSeq]);
    for (const t of r.tasks) {
      await q(S.task, [t.id, sid, run.id, t.parentId, t.kind, t.kindVersion, t.status, t.phase, json(t.checkpoint), json(t.input), t.attempts, t.restarts,
        t.wait === null ? null : json(t.wait), t.wakeAt, t.outcome, json(t.result), t.error === null ? null : json(t.error), t.cancelRequested ? 1 : 0, t.blockedReason, t.version, t.createdAt, t.updatedAt]);
    }
    for (const e of r.effects) await q(S.effect, [e.id, sid, run.id, e.taskId, e.kind, json(e.intent), e.replay, e.status, e.attempts, json(e.receipt), json(e.error), e.createdAt, e.updatedAt, json(e.attemptLog)]);
    for (const e of r.entries) await q(S.entry, [sid, e.seq, e.id, e.conversationId, run.id, e.taskId, e.kind, json(e.body), e.commitSeq, e.at]);
    for (const d of r.documents) {
      await q(S.document, [d.id, sid, d.runId, d.type, d.version, d.baselineVersion, run.createdAt, run.updatedAt]);
      await q(S.baseline, [d.id, d.baselineVersion, json(d.baseline)]);
      for (const o of d.ops) await q(S.op, [d.id, o.version, json(o.op), 0]);
    }
    for (const x of r.snapshots.filter((x) => !shared.has(x.id))) await q(S.snapshot, [x.id, sid, x.runId, x.taskId, x.leaseId, x.imageId, x.workspaceDigest, x.sizeBytes, x.checkpoint, x.parentId, x.commitSeq, x.createdAt, x.prunedAt, x.registryRef ?? null, x.pushedAt ?? null]);
    for (const l of r.leases) await q(S.lease, [l.id, sid, l.hostId, l.containerId, l.imageDigest, l.envFingerprint, l.createdAt, l.expiresAt, l.releasedAt, l.runId, l.epoch ?? null]);
    for (const a of r.egress) await q(S.egress, [a.at, run.id, a.leaseId, a.method, a.target, a.decision, a.reason, a.bytesOut, a.bytesIn, a.count, a.id ?? null, a.endedAt ?? null]);
    for (const a of r.acceptance) await q(S.acceptance, [a.id, run.id, a.requestId, a.decision, a.actor, a.reason, json(a.evidence), a.at, a.commitSeq]);
    for (const c of r.costSamples) await q(S.cost, [run.id, c.at, c.meter, c.key, c.amount]);
    for (const a of r.artifacts) await q(S.artifact, [a.id, sid, run.id, a.taskId, a.stepIndex, a.generation, a.step, a.path, a.sizeBytes, a.sha256, a.snapshotId, a.commitSeq, a.createdAt, a.mode ?? null]);
    await q(S.mark, [run.id, sid, r.digest, r.source, at, r.owner ? JSON.stringify(r.owner) : null]);
  }
  return {
    async importRun(rows, at) {
      try {
        await transaction(pool, (client) => write(client, rows, at));
      } catch (err) {
        // A live commit that wrote one of the ids between the checks and the insert.
        if (!isUniqueViolation(err)) throw err;
        throw importConflict(rows.run.id, location, { 'id (unique constraint)': [(err as Error).message] });
      }
    },
    async getImportedRun(runId) {
      const [r] = await query(pool, 'SELECT * FROM imported_runs WHERE run_id = $1', [runId]);
      return r ? toImported(r) : undefined;
    },
    async listImportedRuns() {
      return (await query(pool, 'SELECT * FROM imported_runs ORDER BY imported_at, run_id')).map(toImported);
    },
    async isImportedSession(sessionId) {
      return (await query(pool, 'SELECT 1 AS x FROM imported_runs WHERE session_id = $1 LIMIT 1', [sessionId])).length > 0;
    },
  };
}
