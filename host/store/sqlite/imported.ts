import type { SessionOwner } from '../ownership';
import type Database from 'better-sqlite3';
import type { Snapshot } from '../../model';
import { importConflict, importKeys, isUniqueViolation, judgeImportKeys } from '../import-keys';
import type { ImportedRun, ImportedRunRecords, ImportRows } from '../imported';
import { json, toSnapshot, type Row } from './rows';

/**
 * The imported rows the ordinary reads add to a run's (or task's) own: they are found by the run
 * (or task), never by their key, so a live run looking up an effect, a request id or a decision
 * by key never meets them.
 */
export function sqliteImportedReads(db: Database.Database) {
  const effectsByRun = db.prepare('SELECT * FROM imported_effects WHERE run_id = ? ORDER BY created_at, id');
  const effectsByTask = db.prepare('SELECT * FROM imported_effects WHERE task_id = ? ORDER BY created_at, id');
  const effectsByBoth = db.prepare('SELECT * FROM imported_effects WHERE run_id = ? AND task_id = ? ORDER BY created_at, id');
  const allEffects = db.prepare('SELECT * FROM imported_effects ORDER BY created_at, id');
  const submission = db.prepare('SELECT * FROM imported_submissions WHERE id = ?');
  const acceptanceByRun = db.prepare('SELECT * FROM imported_acceptance WHERE run_id = ? ORDER BY at, commit_seq, id');
  const allAcceptance = db.prepare('SELECT * FROM imported_acceptance ORDER BY at, commit_seq, id');
  return {
    effects(f: { runId?: string; taskId?: string }): Row[] {
      const rows = f.runId && f.taskId ? effectsByBoth.all(f.runId, f.taskId) : f.runId ? effectsByRun.all(f.runId) : f.taskId ? effectsByTask.all(f.taskId) : allEffects.all();
      return rows as Row[];
    },
    submission: (id: string) => submission.get(id) as Row | undefined,
    acceptance: (f: { runId?: string }) => (f.runId ? acceptanceByRun.all(f.runId) : allAcceptance.all()) as Row[],
  };
}

export const toImported = (r: Row): ImportedRun => ({
  runId: r.run_id as string,
  sessionId: r.session_id as string,
  digest: r.record_digest as string,
  source: r.source as string,
  importedAt: r.imported_at as number,
  owner: typeof r.owner_json === 'string' ? (JSON.parse(r.owner_json) as SessionOwner | null) : null,
});

/**
 * Imported runs: rows written once, in one transaction, exactly as the exporting store held them,
 * plus an `imported_runs` row that marks the session read-only (the commit writer refuses it).
 * Plain INSERTs only (portable to the PostgreSQL store).
 */
export function sqliteImportedRuns(db: Database.Database): ImportedRunRecords {
  const p = (sql: string) => db.prepare(sql);
  const s = {
    get: p('SELECT * FROM imported_runs WHERE run_id = ?'),
    list: p('SELECT * FROM imported_runs ORDER BY imported_at, run_id'),
    bySession: p('SELECT 1 AS x FROM imported_runs WHERE session_id = ?'),
    snapshotsHeld: p(`SELECT s.*, EXISTS (SELECT 1 FROM imported_runs i WHERE i.session_id = s.session_id) AS imported
                      FROM snapshots s WHERE s.id IN (SELECT value FROM json_each(?))`),
    mark: p('INSERT INTO imported_runs (run_id, session_id, record_digest, source, imported_at, owner_json) VALUES (?, ?, ?, ?, ?, ?)'),
    session: p('INSERT INTO sessions (id, created_at, last_seq, entry_seq, meta_json) VALUES (?, ?, ?, ?, ?)'),
    commit: p('INSERT INTO commits (session_id, seq, at, label, actor) VALUES (?, ?, ?, ?, ?)'),
    submission: p('INSERT INTO imported_submissions (id, session_id, request_id, run_id, input_json, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
    run: p(`INSERT INTO runs (id, session_id, submission_id, kind, state, root_task_id, transition_count, versions_json, created_at, updated_at, forked_from_run_id)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    transition: p(`INSERT INTO run_transitions (run_id, n, at, actor, from_state, to_state, reason, versions_json, commit_seq)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    task: p(`INSERT INTO tasks (id, session_id, run_id, parent_id, kind, kind_version, status, phase, checkpoint_json, input_json, attempts, restarts,
               wait_json, wake_at, outcome, result_json, error_json, cancel_requested, blocked_reason, version, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    effect: p(`INSERT INTO imported_effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, attempts, receipt_json, error_json, created_at, updated_at, attempts_json)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    entry: p(`INSERT INTO entries (session_id, seq, id, conversation_id, run_id, task_id, kind, body_json, commit_seq, at)
              VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    document: p(`INSERT INTO documents (id, session_id, run_id, type, version, baseline_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
    baseline: p('INSERT INTO document_baselines (document_id, version, state_json) VALUES (?, ?, ?)'),
    op: p('INSERT INTO document_ops (document_id, version, op_json, commit_seq) VALUES (?, ?, ?, ?)'),
    snapshot: p(`INSERT INTO snapshots (id, session_id, run_id, task_id, lease_id, image_id, workspace_digest, size_bytes, checkpoint, parent_id, commit_seq, created_at, pruned_at, registry_ref, pushed_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    lease: p(`INSERT INTO leases (id, session_id, host_id, container_id, image_digest, env_fingerprint, created_at, expires_at, released_at, run_id, epoch)
              VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    egress: p(`INSERT INTO egress_attempts (at, run_id, lease_id, method, target, decision, reason, bytes_out, bytes_in, count, attempt_id, ended_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    acceptance: p(`INSERT INTO imported_acceptance (id, run_id, request_id, decision, actor, reason, evidence_json, at, commit_seq)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    cost: p('INSERT INTO cost_samples (run_id, at, meter, meter_key, amount) VALUES (?, ?, ?, ?, ?)'),
    artifact: p(`INSERT INTO artifacts (id, session_id, run_id, task_id, step_index, generation, step, path, size_bytes, sha256, snapshot_id, commit_seq, created_at, mode)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
  };
  const held = (tables: string[], ids: string[]) => {
    const inUse = new Set<string>();
    for (const t of tables) for (const r of db.prepare(`SELECT id FROM ${t} WHERE id IN (SELECT value FROM json_each(?))`).all(JSON.stringify(ids)) as Row[]) inUse.add(r.id as string);
    return [...inUse];
  };
  const heldSnapshots = (ids: string[]) =>
    (s.snapshotsHeld.all(JSON.stringify(ids)) as Row[]).map((r): { snapshot: Snapshot; imported: boolean } => ({ snapshot: toSnapshot(r), imported: r.imported === 1 }));
  const check = (r: ImportRows): Set<string> => {
    const inUse = new Map(importKeys(r).map((k) => [k.what, k.tables.length && k.ids.length ? held(k.tables, k.ids) : []]));
    return judgeImportKeys(r, db.name, inUse, r.snapshots.length ? heldSnapshots(r.snapshots.map((x) => x.id)) : []);
  };
  const write = db.transaction((r: ImportRows, at: number) => {
    const { run, session } = r;
    const shared = check(r);
    const sid = session.id;
    s.session.run(sid, session.createdAt, session.lastSeq, r.entries.reduce((m, e) => Math.max(m, e.seq), 0), json(session.meta));
    for (const c of r.commits) s.commit.run(sid, c.seq, c.at, c.label, c.actor);
    if (r.submission) s.submission.run(r.submission.id, sid, r.submission.requestId, r.submission.runId, json(r.submission.input), r.submission.createdAt);
    s.run.run(run.id, sid, run.submissionId, run.kind, run.state, run.rootTaskId, run.transitionCount, json(run.versions), run.createdAt, run.updatedAt, r.forkedFromRunId);
    for (const t of r.transitions) s.transition.run(run.id, t.n, t.at, t.actor, t.from, t.to, t.reason, json(t.versions), t.commitSeq);
    for (const t of r.tasks) {
      s.task.run(t.id, sid, run.id, t.parentId, t.kind, t.kindVersion, t.status, t.phase, json(t.checkpoint), json(t.input), t.attempts, t.restarts,
        t.wait === null ? null : json(t.wait), t.wakeAt, t.outcome, json(t.result), t.error === null ? null : json(t.error), t.cancelRequested ? 1 : 0, t.blockedReason, t.version, t.createdAt, t.updatedAt);
    }
    for (const e of r.effects) s.effect.run(e.id, sid, run.id, e.taskId, e.kind, json(e.intent), e.replay, e.status, e.attempts, json(e.receipt), json(e.error), e.createdAt, e.updatedAt, json(e.attemptLog));
    for (const e of r.entries) s.entry.run(sid, e.seq, e.id, e.conversationId, run.id, e.taskId, e.kind, json(e.body), e.commitSeq, e.at);
    for (const d of r.documents) {
      s.document.run(d.id, sid, d.runId, d.type, d.version, d.baselineVersion, run.createdAt, run.updatedAt);
      s.baseline.run(d.id, d.baselineVersion, json(d.baseline));
      for (const o of d.ops) s.op.run(d.id, o.version, json(o.op), 0);
    }
    for (const x of r.snapshots.filter((x) => !shared.has(x.id))) s.snapshot.run(x.id, sid, x.runId, x.taskId, x.leaseId, x.imageId, x.workspaceDigest, x.sizeBytes, x.checkpoint, x.parentId, x.commitSeq, x.createdAt, x.prunedAt, x.registryRef ?? null, x.pushedAt ?? null);
    for (const l of r.leases) s.lease.run(l.id, sid, l.hostId, l.containerId, l.imageDigest, l.envFingerprint, l.createdAt, l.expiresAt, l.releasedAt, l.runId, l.epoch ?? null);
    for (const a of r.egress) s.egress.run(a.at, run.id, a.leaseId, a.method, a.target, a.decision, a.reason, a.bytesOut, a.bytesIn, a.count, a.id ?? null, a.endedAt ?? null);
    for (const a of r.acceptance) s.acceptance.run(a.id, run.id, a.requestId, a.decision, a.actor, a.reason, json(a.evidence), a.at, a.commitSeq);
    for (const c of r.costSamples) s.cost.run(run.id, c.at, c.meter, c.key, c.amount);
    for (const a of r.artifacts) s.artifact.run(a.id, sid, run.id, a.taskId, a.stepIndex, a.generation, a.step, a.path, a.sizeBytes, a.sha256, a.snapshotId, a.commitSeq, a.createdAt, a.mode ?? null);
    s.mark.run(run.id, sid, r.digest, r.source, at, r.owner ? JSON.stringify(r.owner) : null);
  });
  return {
    async importRun(rows, at) {
      try {
        write.immediate(rows, at);
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        throw importConflict(rows.run.id, db.name, { 'id (unique constraint)': [(err as Error).message] });
      }
    },
    async getImportedRun(runId) {
      const r = s.get.get(runId) as Row | undefined;
      return r ? toImported(r) : undefined;
    },
    async listImportedRuns() {
      return (s.list.all() as Row[]).map(toImported);
    },
    async isImportedSession(sessionId) {
      return s.bySession.get(sessionId) !== undefined;
    },
  };
}
