import type Database from 'better-sqlite3';
import { BerthError } from '../../errors';
import { assertRunTransition, isFinalRunState, type EffectStatus, type RunState } from '../../model';
import type { CommitConflict, CommitInput, TaskChanges } from '../commit-input';
import { json } from './rows';
import { Conflict, TASK_COLUMNS } from '../commit-columns';
import { acceptanceWriter } from './acceptance';
import { artifactInserter } from './artifacts';
import { COMMIT_LOG_INSERT } from './commit-log';

/**
 * Applies one {@link CommitInput} in a single IMMEDIATE transaction and returns the new
 * per-session sequence number, or the first conflict found (in which case nothing was written).
 */
export class CommitWriter {
  private readonly taskUpdates = new Map<string, Database.Statement>();
  private readonly s;
  private readonly writeAcceptance: ReturnType<typeof acceptanceWriter>;
  private readonly insertArtifact;

  constructor(private readonly db: Database.Database) {
    const p = (sql: string) => db.prepare(sql);
    this.writeAcceptance = acceptanceWriter(db);
    this.insertArtifact = artifactInserter(db);
    this.s = {
      fence: p('SELECT epoch FROM fencing WHERE scope = ?'),
      imported: p('SELECT run_id FROM imported_runs WHERE session_id = ?'),
      sessionInsert: p('INSERT OR IGNORE INTO sessions (id, created_at, meta_json) VALUES (?, ?, ?)'),
      sessionGet: p('SELECT last_seq, entry_seq FROM sessions WHERE id = ?'),
      sessionBump: p('UPDATE sessions SET last_seq = ?, entry_seq = ? WHERE id = ?'),
      commitInsert: p('INSERT INTO commits (session_id, seq, at, label, actor) VALUES (?, ?, ?, ?, ?)'),
      commitLogInsert: p(COMMIT_LOG_INSERT),
      conversationInsert: p('INSERT INTO conversations (id, session_id, created_at) VALUES (?, ?, ?)'),
      submissionByRequest: p('SELECT id, run_id FROM submissions WHERE request_id = ?'),
      submissionInsert: p(
        'INSERT INTO submissions (id, session_id, request_id, run_id, input_json, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      runInsert: p(
        `INSERT INTO runs (id, session_id, submission_id, kind, state, root_task_id, transition_count, versions_json, created_at, updated_at, forked_from_run_id)
         VALUES (?, ?, ?, ?, 'admitted', ?, 1, ?, ?, ?, ?)`,
      ),
      runGet: p('SELECT state, transition_count, versions_json FROM runs WHERE id = ?'),
      runUpdate: p('UPDATE runs SET state = ?, transition_count = ?, versions_json = ?, updated_at = ? WHERE id = ? AND state = ?'),
      transitionInsert: p(
        `INSERT INTO run_transitions (run_id, n, at, actor, from_state, to_state, reason, versions_json, commit_seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      unresolvedEffects: p(
        "SELECT id FROM effects WHERE run_id = ? AND status IN ('intended', 'executing', 'unknown') ORDER BY id",
      ),
      uncertainEffects: p("SELECT id FROM effects WHERE run_id = ? AND status IN ('executing', 'unknown') ORDER BY id"),
      waitingOn: p("SELECT COUNT(*) AS n FROM tasks WHERE run_id = ? AND status = 'waiting' AND json_extract(wait_json, '$.signal') = ?"),
      entryInsert: p(
        `INSERT INTO entries (session_id, seq, id, conversation_id, run_id, task_id, kind, body_json, commit_seq, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      docGet: p('SELECT version FROM documents WHERE id = ?'),
      docInsert: p(
        `INSERT INTO documents (id, session_id, run_id, type, version, baseline_version, created_at, updated_at)
         VALUES (?, ?, ?, ?, 0, 0, ?, ?)`,
      ),
      docBump: p('UPDATE documents SET version = ?, updated_at = ? WHERE id = ? AND version = ?'),
      docBaselineMark: p('UPDATE documents SET baseline_version = ? WHERE id = ?'),
      docBaselineInsert: p('INSERT INTO document_baselines (document_id, version, state_json) VALUES (?, ?, ?)'),
      docOpInsert: p('INSERT INTO document_ops (document_id, version, op_json, commit_seq) VALUES (?, ?, ?, ?)'),
      taskInsert: p(
        `INSERT INTO tasks (id, session_id, run_id, parent_id, kind, kind_version, status, phase, checkpoint_json, input_json, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      taskVersion: p('SELECT version FROM tasks WHERE id = ?'),
      taskCancel: p('UPDATE tasks SET cancel_requested = 1, updated_at = ? WHERE id = ?'),
      effectGet: p('SELECT status, intent_json FROM effects WHERE id = ?'),
      snapshotInsert: p(
        `INSERT INTO snapshots (id, session_id, run_id, task_id, lease_id, image_id, workspace_digest, size_bytes, checkpoint, parent_id, commit_seq, created_at, registry_ref, pushed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      effectUpdate: p(
        `UPDATE effects SET status = COALESCE(?, status), attempts = COALESCE(?, attempts),
         receipt_json = COALESCE(?, receipt_json), error_json = COALESCE(?, error_json), updated_at = ? WHERE id = ?`,
      ),
      effectOwner: p('UPDATE effects SET session_id = ?, run_id = ?, task_id = ? WHERE id = ?'),
      effectInsert: p(
        `INSERT INTO effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'intended', ?, ?)`,
      ),
    };
  }

  apply(input: CommitInput, at: number): { ok: true; seq: number; at: number } | { ok: false; conflict: CommitConflict } {
    try {
      const seq = this.db.transaction(() => this.write(input, at)).immediate();
      return { ok: true, seq, at };
    } catch (err) {
      if (err instanceof Conflict) return { ok: false, conflict: err.conflict };
      throw err;
    }
  }

  private write(c: CommitInput, at: number): number {
    const s = this.s;
    const sid = c.sessionId;
    if (c.fence) {
      const row = s.fence.get(c.fence.scope) as { epoch: number } | undefined;
      if (row?.epoch !== c.fence.epoch) {
        throw new Conflict({ kind: 'fence', scope: c.fence.scope, expected: c.fence.epoch, actual: row?.epoch ?? null });
      }
    }
    if (c.createSession) s.sessionInsert.run(sid, at, json(c.createSession.meta ?? null));
    const session = s.sessionGet.get(sid) as { last_seq: number; entry_seq: number } | undefined;
    if (!session) throw new BerthError('session_not_found', `session ${sid} does not exist`, { ids: { sessionId: sid } });
    // An imported run is a record, not work: nothing may advance it (resume, reconcile, approve,
    // cancel, a worker that found its tasks), whatever path the commit came from.
    const imported = s.imported.get(sid) as { run_id: string } | undefined;
    if (imported) {
      throw new BerthError('run_imported', `run ${imported.run_id} was imported from an exported record: it can be shown and checked, never driven`, { ids: { sessionId: sid, runId: imported.run_id } });
    }
    const seq = session.last_seq + 1;
    let entrySeq = session.entry_seq;
    s.commitInsert.run(sid, seq, at, c.label, c.actor ?? 'host');
    s.commitLogInsert.run(sid, seq);

    for (const conv of c.conversations ?? []) s.conversationInsert.run(conv.id, sid, at);
    for (const sub of c.submissions ?? []) {
      const existing = s.submissionByRequest.get(sub.requestId) as { id: string; run_id: string } | undefined;
      if (existing) {
        throw new Conflict({
          kind: 'duplicate_request',
          requestId: sub.requestId,
          submissionId: existing.id,
          runId: existing.run_id,
        });
      }
      s.submissionInsert.run(sub.id, sid, sub.requestId, sub.runId, json(sub.input), at);
    }
    for (const run of c.runs ?? []) {
      s.runInsert.run(run.id, sid, run.submissionId, run.kind, run.rootTaskId, json(run.versions), at, at, run.forkedFromRunId ?? null);
      s.transitionInsert.run(run.id, 1, at, c.actor ?? 'host', null, 'admitted', run.reason ?? 'submitted', json(run.versions), seq);
    }
    for (const e of c.entries ?? []) {
      entrySeq += 1;
      s.entryInsert.run(sid, entrySeq, e.id, e.conversationId ?? null, e.runId ?? null, e.taskId ?? null, e.kind, json(e.body), seq, at);
    }
    for (const d of c.documentOps ?? []) this.writeDocumentOp(sid, d, seq, at);
    for (const t of c.tasks ?? []) {
      s.taskInsert.run(t.id, sid, t.runId, t.parentId, t.kind, t.kindVersion, t.status ?? 'pending', t.phase, json(t.checkpoint ?? null), json(t.input), at, at);
    }
    for (const t of c.expectTasks ?? []) {
      const row = s.taskVersion.get(t.taskId) as { version: number } | undefined;
      if (row?.version !== t.version) {
        throw new Conflict({ kind: 'task_version', taskId: t.taskId, expected: t.version, actual: row?.version ?? null });
      }
    }
    for (const t of c.taskTransitions ?? []) this.writeTaskTransition(t.taskId, t.expectVersion, t.set, at);
    for (const id of c.cancelTasks ?? []) s.taskCancel.run(at, id);
    // Effects before run transitions: a commit that confirms the last effect may also complete the run.
    for (const e of c.effects ?? []) this.writeEffect(sid, e, at);
    for (const n of c.snapshots ?? []) {
      s.snapshotInsert.run(n.id, sid, n.runId, n.taskId, n.leaseId, n.imageId, n.workspaceDigest, n.sizeBytes, n.checkpoint, n.parentId, seq, at, n.registryRef ?? null, n.pushedAt ?? null);
    }
    for (const a of c.acceptance ?? []) this.writeAcceptance(a, seq, at);
    for (const a of c.artifacts ?? []) this.insertArtifact(a, sid, seq, at);
    for (const t of c.runTransitions ?? []) {
      // A conditional move (the last open approval of a run decided): evaluated after this
      // commit's task changes, against what other commits have written, so two deciders that
      // each saw the other still waiting cannot both skip it.
      if (t.unlessWaiting && (s.waitingOn.get(t.runId, t.unlessWaiting) as { n: number }).n > 0) continue;
      this.writeRunTransition(t, c.actor ?? t.actor, seq, at);
    }

    s.sessionBump.run(seq, entrySeq, sid);
    return seq;
  }

  private writeDocumentOp(sid: string, d: NonNullable<CommitInput['documentOps']>[number], seq: number, at: number): void {
    const s = this.s;
    if (d.create) {
      if (d.expectVersion !== 0) throw new BerthError('bad_commit', `creating document ${d.documentId} requires expectVersion 0`);
      if (s.docGet.get(d.documentId)) throw new Conflict({ kind: 'document_version', documentId: d.documentId, expected: 0, actual: 1 });
      s.docInsert.run(d.documentId, sid, d.create.runId, d.create.type, at, at);
      s.docBaselineInsert.run(d.documentId, 0, json(d.create.initial));
    }
    const next = d.expectVersion + 1;
    if (s.docBump.run(next, at, d.documentId, d.expectVersion).changes !== 1) {
      const row = s.docGet.get(d.documentId) as { version: number } | undefined;
      throw new Conflict({ kind: 'document_version', documentId: d.documentId, expected: d.expectVersion, actual: row?.version ?? null });
    }
    s.docOpInsert.run(d.documentId, next, json(d.op), seq);
    if (d.baseline !== undefined) {
      s.docBaselineInsert.run(d.documentId, next, json(d.baseline));
      s.docBaselineMark.run(next, d.documentId);
    }
  }

  private writeTaskTransition(taskId: string, expectVersion: number, set: TaskChanges, at: number): void {
    const keys = (Object.keys(set) as Array<keyof TaskChanges>).filter((k) => set[k] !== undefined).sort();
    const cacheKey = keys.join(',');
    let stmt = this.taskUpdates.get(cacheKey);
    if (!stmt) {
      const assignments = keys.map((k) => `${TASK_COLUMNS[k].column} = ?`);
      stmt = this.db.prepare(
        `UPDATE tasks SET ${[...assignments, 'version = version + 1', 'updated_at = ?'].join(', ')} WHERE id = ? AND version = ?`,
      );
      this.taskUpdates.set(cacheKey, stmt);
    }
    const values = keys.map((k) => TASK_COLUMNS[k].encode(set[k] as never));
    if (stmt.run(...values, at, taskId, expectVersion).changes !== 1) {
      const row = this.s.taskVersion.get(taskId) as { version: number } | undefined;
      throw new Conflict({ kind: 'task_version', taskId, expected: expectVersion, actual: row?.version ?? null });
    }
  }

  private writeEffect(sid: string, e: NonNullable<CommitInput['effects']>[number], at: number): void {
    const s = this.s;
    let row = s.effectGet.get(e.id) as { status: EffectStatus; intent_json: string } | undefined;
    if (e.create) {
      if (row && row.intent_json !== json(e.create.intent)) throw new Conflict({ kind: 'effect_intent', effectId: e.id });
      if (!row) {
        s.effectInsert.run(e.id, sid, e.create.runId, e.create.taskId, e.create.kind, json(e.create.intent), e.create.replay, at, at);
        row = { status: 'intended', intent_json: json(e.create.intent) };
      }
    }
    if (!row) throw new BerthError('effect_not_found', `effect ${e.id} does not exist`, { ids: { effectId: e.id } });
    if (e.expectStatus !== undefined && row.status !== e.expectStatus) {
      throw new Conflict({ kind: 'effect_status', effectId: e.id, expected: e.expectStatus, actual: row.status });
    }
    if (!e.set) return;
    const { status, attempts, receipt, error, owner } = e.set;
    if (owner) s.effectOwner.run(sid, owner.runId, owner.taskId, e.id);
    s.effectUpdate.run(
      status ?? null,
      attempts ?? null,
      receipt === undefined ? null : json(receipt),
      error === undefined ? null : json(error),
      at,
      e.id,
    );
  }

  private writeRunTransition(t: NonNullable<CommitInput['runTransitions']>[number], actor: string, seq: number, at: number): void {
    const s = this.s;
    const row = s.runGet.get(t.runId) as { state: RunState; transition_count: number; versions_json: string } | undefined;
    if (!row || row.state !== t.from) {
      throw new Conflict({ kind: 'run_state', runId: t.runId, expected: t.from, actual: row?.state ?? null });
    }
    if (!(t.ownerChange && t.from === t.to && !isFinalRunState(t.from))) assertRunTransition(t.runId, t.from, t.to);
    // Checked here, inside the transaction, so an effect marked `executing` by a sibling task
    // between a decider's read and its commit cannot slip under a final state. `completed` also
    // needs every intended effect done; other final states only need none possibly in progress.
    if (t.to === 'completed' || isFinalRunState(t.to)) {
      const open = ((t.to === 'completed' ? s.unresolvedEffects : s.uncertainEffects).all(t.runId) as Array<{ id: string }>).map((r) => r.id);
      if (open.length > 0) throw new Conflict({ kind: 'unresolved_effects', runId: t.runId, effectIds: open });
    }
    // The versions in force carry over: a transition names what changed (the kernel names only
    // itself), never erases the environment fingerprint or image digest the run was admitted with.
    const versions = { ...JSON.parse(row.versions_json), ...(t.versions ?? {}) };
    const n = row.transition_count + 1;
    s.runUpdate.run(t.to, n, json(versions), at, t.runId, t.from);
    s.transitionInsert.run(t.runId, n, at, t.actor || actor, t.from, t.to, t.reason, json(versions), seq);
  }
}

