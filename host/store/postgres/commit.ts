import type pg from 'pg';
import { BerthError } from '../../errors';
import { assertRunTransition, isFinalRunState, type EffectStatus, type RunState } from '../../model';
import type { CommitConflict, CommitInput, TaskChanges } from '../commit-input';
import { json } from './rows';
import { Conflict, TASK_COLUMNS } from '../commit-columns';
import { writeAcceptance } from './acceptance';
import { insertArtifact } from './artifacts';
import { query, RETRY_CODES, storeError } from './open';

const S = {
  // FOR SHARE: a take-over (which updates this row) waits for commits that checked the old epoch,
  // and commits after it see the new one; two commits under one epoch do not block each other.
  fence: 'SELECT epoch FROM fencing WHERE scope = $1 FOR SHARE',
  sessionInsert: 'INSERT INTO sessions (id, created_at, meta_json) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING',
  // The session row lock serialises every commit of one session across hosts: the sequence is
  // read and bumped under it, as SQLite's single writer does for the whole file.
  // `imported`: the run of an imported session (read in the same round trip), which no commit may change.
  sessionGet: `SELECT s.last_seq, s.entry_seq, (SELECT run_id FROM imported_runs WHERE session_id = s.id LIMIT 1) AS imported
    FROM sessions s WHERE s.id = $1 FOR UPDATE OF s`,
  // The fence check and the session lock in one round trip (the common, fenced, commit).
  sessionWithFence: `SELECT s.last_seq, s.entry_seq, (SELECT epoch FROM fencing WHERE scope = $2 FOR SHARE) AS epoch,
      (SELECT run_id FROM imported_runs WHERE session_id = s.id LIMIT 1) AS imported
    FROM sessions s WHERE s.id = $1 FOR UPDATE OF s`,
  // The commit record, its store-wide number and the sequence bump, last, in one round trip.
  // The store-wide number: bumping the one-row counter takes its row lock, held until this
  // transaction's COMMIT (sent together with this statement), so a concurrent commit of another
  // session waits here and takes the next number only once this one is committed. Numbers thus
  // become visible in commit order with no gaps: a reader that saw seq N never later finds a new
  // seq below N (an identity column would not give that). The lock is held for the last round
  // trip only, after every other write of the commit.
  commitAndBump: `WITH c AS (INSERT INTO commits (session_id, seq, at, label, actor) VALUES ($3, $1, $4, $5, $6)),
      n AS (UPDATE commit_log_counter SET seq = seq + 1 RETURNING seq),
      l AS (INSERT INTO commit_log (seq, session_id, session_seq) SELECT n.seq, $3, $1 FROM n)
    UPDATE sessions SET last_seq = $1, entry_seq = $2 WHERE id = $3`,
  conversationInsert: 'INSERT INTO conversations (id, session_id, created_at) VALUES ($1, $2, $3)',
  submissionInsert: `INSERT INTO submissions (id, session_id, request_id, run_id, input_json, created_at) VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (request_id) DO NOTHING RETURNING id`,
  submissionByRequest: 'SELECT id, run_id FROM submissions WHERE request_id = $1',
  runInsert: `INSERT INTO runs (id, session_id, submission_id, kind, state, root_task_id, transition_count, versions_json, created_at, updated_at, forked_from_run_id)
    VALUES ($1, $2, $3, $4, 'admitted', $5, 1, $6, $7, $8, $9)`,
  runGet: 'SELECT state, transition_count, versions_json FROM runs WHERE id = $1 FOR UPDATE',
  runUpdate: 'UPDATE runs SET state = $1, transition_count = $2, versions_json = $3, updated_at = $4 WHERE id = $5 AND state = $6',
  transitionInsert: `INSERT INTO run_transitions (run_id, n, at, actor, from_state, to_state, reason, versions_json, commit_seq)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
  unresolvedEffects: "SELECT id FROM effects WHERE run_id = $1 AND status IN ('intended', 'executing', 'unknown') ORDER BY id",
  uncertainEffects: "SELECT id FROM effects WHERE run_id = $1 AND status IN ('executing', 'unknown') ORDER BY id",
  waitingOn: "SELECT COUNT(*) AS n FROM tasks WHERE run_id = $1 AND status = 'waiting' AND (wait_json::jsonb ->> 'signal') = $2",
  entryInsert: `INSERT INTO entries (session_id, seq, id, conversation_id, run_id, task_id, kind, body_json, commit_seq, at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
  docGet: 'SELECT version FROM documents WHERE id = $1',
  docInsert: `INSERT INTO documents (id, session_id, run_id, type, version, baseline_version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, 0, 0, $5, $6)`,
  docBump: 'UPDATE documents SET version = $1, updated_at = $2 WHERE id = $3 AND version = $4 RETURNING id',
  docBaselineMark: 'UPDATE documents SET baseline_version = $1 WHERE id = $2',
  docBaselineInsert: 'INSERT INTO document_baselines (document_id, version, state_json) VALUES ($1, $2, $3)',
  docOpInsert: 'INSERT INTO document_ops (document_id, version, op_json, commit_seq) VALUES ($1, $2, $3, $4)',
  taskInsert: `INSERT INTO tasks (id, session_id, run_id, parent_id, kind, kind_version, status, phase, checkpoint_json, input_json, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
  taskVersion: 'SELECT version FROM tasks WHERE id = $1',
  taskCancel: 'UPDATE tasks SET cancel_requested = 1, updated_at = $1 WHERE id = $2',
  effectGet: 'SELECT status, intent_json FROM effects WHERE id = $1 FOR UPDATE',
  snapshotInsert: `INSERT INTO snapshots (id, session_id, run_id, task_id, lease_id, image_id, workspace_digest, size_bytes, checkpoint, parent_id, commit_seq, created_at, registry_ref, pushed_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
  effectUpdate: `UPDATE effects SET status = COALESCE($1, status), attempts = COALESCE($2, attempts),
    receipt_json = COALESCE($3, receipt_json), error_json = COALESCE($4, error_json), updated_at = $5 WHERE id = $6`,
  effectOwner: 'UPDATE effects SET session_id = $1, run_id = $2, task_id = $3 WHERE id = $4',
  effectInsert: `INSERT INTO effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'intended', $8, $9)`,
};

const ATTEMPTS = 5;

/**
 * Applies one {@link CommitInput} in a single transaction on one pooled connection and returns
 * the new per-session sequence number, or the first conflict found (nothing written then).
 * Deadlocks and serialization failures between hosts are retried here; a lost connection is a
 * retryable `store_unavailable` (the server rolled the transaction back, or the COMMIT's fate is
 * unknown and the caller re-reads, as after a crash).
 */
export class CommitWriter {
  /**
   * @param midCommit called after the first writes and before the rest; a test hook (the
   *   PostgreSQL store passes a fault point) so a connection can be killed inside a transaction.
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly midCommit: (label: string) => void | Promise<void> = () => {},
  ) {}

  async apply(input: CommitInput, at: number): Promise<{ ok: true; seq: number; at: number } | { ok: false; conflict: CommitConflict }> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        throw storeError(err);
      }
      let broken: Error | undefined;
      try {
        // Not awaited alone: pg sends it ahead of the first statement on the same connection, and
        // its failure surfaces through that statement or the COMMIT.
        const begin = client.query('BEGIN');
        begin.catch(() => {}); // observed by the await below; never an unhandled rejection
        const { seq, last } = await this.write(client, input, at);
        await begin;
        // The last statement and the COMMIT go out together. Had that statement failed, the COMMIT
        // of the aborted transaction rolls it back, and its own error is thrown here.
        const commit = client.query('COMMIT');
        commit.catch(() => {});
        await last;
        await commit;
        return { ok: true, seq, at };
      } catch (err) {
        await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        if (err instanceof Conflict) return { ok: false, conflict: err.conflict };
        const sqlstate = err instanceof BerthError ? String(err.details?.sqlstate ?? '') : ((err as { code?: string }).code ?? '');
        if (RETRY_CODES.has(sqlstate) && attempt < ATTEMPTS) continue;
        throw storeError(err);
      } finally {
        client.release(broken);
      }
    }
  }

  /** Writes everything but waits for the last statement only as `last`, so it can travel with the COMMIT. */
  private async write(db: pg.PoolClient, c: CommitInput, at: number): Promise<{ seq: number; last: Promise<unknown> }> {
    const sid = c.sessionId;
    if (c.createSession) await query(db, S.sessionInsert, [sid, at, json(c.createSession.meta ?? null)]);
    let session: { last_seq: number; entry_seq: number; imported: string | null } | undefined;
    if (c.fence) {
      const [row] = await query<{ last_seq: number; entry_seq: number; epoch: number | null; imported: string | null }>(db, S.sessionWithFence, [sid, c.fence.scope]);
      // No session row: read the fence alone, so a stale host still learns it was fenced first.
      const epoch = row ? row.epoch : ((await query<{ epoch: number }>(db, S.fence, [c.fence.scope]))[0]?.epoch ?? null);
      if (epoch !== c.fence.epoch) throw new Conflict({ kind: 'fence', scope: c.fence.scope, expected: c.fence.epoch, actual: epoch ?? null });
      session = row;
    } else {
      [session] = await query<{ last_seq: number; entry_seq: number; imported: string | null }>(db, S.sessionGet, [sid]);
    }
    if (!session) throw new BerthError('session_not_found', `session ${sid} does not exist`, { ids: { sessionId: sid } });
    // An imported run is a record, not work: nothing may advance it, whatever path the commit came from.
    if (session.imported) {
      const runId = session.imported;
      throw new BerthError('run_imported', `run ${runId} was imported from an exported record: it can be shown and checked, never driven`, { ids: { sessionId: sid, runId } });
    }
    const seq = session.last_seq + 1;
    let entrySeq = session.entry_seq;

    for (const conv of c.conversations ?? []) await query(db, S.conversationInsert, [conv.id, sid, at]);
    for (const sub of c.submissions ?? []) {
      const inserted = await query(db, S.submissionInsert, [sub.id, sid, sub.requestId, sub.runId, json(sub.input), at]);
      if (inserted.length === 0) {
        const [existing] = await query<{ id: string; run_id: string }>(db, S.submissionByRequest, [sub.requestId]);
        throw new Conflict({ kind: 'duplicate_request', requestId: sub.requestId, submissionId: existing!.id, runId: existing!.run_id });
      }
    }
    for (const run of c.runs ?? []) {
      await query(db, S.runInsert, [run.id, sid, run.submissionId, run.kind, run.rootTaskId, json(run.versions), at, at, run.forkedFromRunId ?? null]);
      await query(db, S.transitionInsert, [run.id, 1, at, c.actor ?? 'host', null, 'admitted', run.reason ?? 'submitted', json(run.versions), seq]);
    }
    for (const e of c.entries ?? []) {
      entrySeq += 1;
      await query(db, S.entryInsert, [sid, entrySeq, e.id, e.conversationId ?? null, e.runId ?? null, e.taskId ?? null, e.kind, json(e.body), seq, at]);
    }
    for (const d of c.documentOps ?? []) await this.writeDocumentOp(db, sid, d, seq, at);
    await this.midCommit(c.label);
    for (const t of c.tasks ?? []) {
      await query(db, S.taskInsert, [t.id, sid, t.runId, t.parentId, t.kind, t.kindVersion, t.status ?? 'pending', t.phase, json(t.checkpoint ?? null), json(t.input), at, at]);
    }
    for (const t of c.expectTasks ?? []) {
      const [row] = await query<{ version: number }>(db, S.taskVersion, [t.taskId]);
      if (row?.version !== t.version) throw new Conflict({ kind: 'task_version', taskId: t.taskId, expected: t.version, actual: row?.version ?? null });
    }
    for (const t of c.taskTransitions ?? []) await this.writeTaskTransition(db, t.taskId, t.expectVersion, t.set, at);
    for (const id of c.cancelTasks ?? []) await query(db, S.taskCancel, [at, id]);
    // Effects before run transitions: a commit that confirms the last effect may also complete the run.
    for (const e of c.effects ?? []) await this.writeEffect(db, sid, e, at);
    for (const n of c.snapshots ?? []) {
      await query(db, S.snapshotInsert, [n.id, sid, n.runId, n.taskId, n.leaseId, n.imageId, n.workspaceDigest, n.sizeBytes, n.checkpoint, n.parentId, seq, at, n.registryRef ?? null, n.pushedAt ?? null]);
    }
    for (const a of c.acceptance ?? []) await writeAcceptance(db, a, seq, at);
    for (const a of c.artifacts ?? []) await insertArtifact(db, a, sid, seq, at);
    for (const t of c.runTransitions ?? []) {
      // Evaluated after this commit's task changes, under the session lock (see the SQLite writer).
      if (t.unlessWaiting) {
        const [w] = await query<{ n: number }>(db, S.waitingOn, [t.runId, t.unlessWaiting]);
        if (w!.n > 0) continue;
      }
      await this.writeRunTransition(db, t, c.actor ?? t.actor, seq, at);
    }
    // Written last, but inside the same transaction: the commit's rows above reference its seq only by value.
    const last = query(db, S.commitAndBump, [seq, entrySeq, sid, at, c.label, c.actor ?? 'host']);
    last.catch(() => {}); // awaited by apply; never an unhandled rejection
    return { seq, last };
  }

  private async writeDocumentOp(db: pg.PoolClient, sid: string, d: NonNullable<CommitInput['documentOps']>[number], seq: number, at: number): Promise<void> {
    if (d.create) {
      if (d.expectVersion !== 0) throw new BerthError('bad_commit', `creating document ${d.documentId} requires expectVersion 0`);
      if ((await query(db, S.docGet, [d.documentId])).length > 0) {
        throw new Conflict({ kind: 'document_version', documentId: d.documentId, expected: 0, actual: 1 });
      }
      await query(db, S.docInsert, [d.documentId, sid, d.create.runId, d.create.type, at, at]);
      await query(db, S.docBaselineInsert, [d.documentId, 0, json(d.create.initial)]);
    }
    const next = d.expectVersion + 1;
    if ((await query(db, S.docBump, [next, at, d.documentId, d.expectVersion])).length !== 1) {
      const [row] = await query<{ version: number }>(db, S.docGet, [d.documentId]);
      throw new Conflict({ kind: 'document_version', documentId: d.documentId, expected: d.expectVersion, actual: row?.version ?? null });
    }
    await query(db, S.docOpInsert, [d.documentId, next, json(d.op), seq]);
    if (d.baseline !== undefined) {
      await query(db, S.docBaselineInsert, [d.documentId, next, json(d.baseline)]);
      await query(db, S.docBaselineMark, [next, d.documentId]);
    }
  }

  private async writeTaskTransition(db: pg.PoolClient, taskId: string, expectVersion: number, set: TaskChanges, at: number): Promise<void> {
    const keys = (Object.keys(set) as Array<keyof TaskChanges>).filter((k) => set[k] !== undefined).sort();
    const assignments = keys.map((k, i) => `${TASK_COLUMNS[k].column} = $${i + 1}`);
    const n = keys.length;
    // Under READ COMMITTED a concurrent writer's UPDATE makes this one wait and re-check the
    // version on the row it committed, so exactly one of two racing CAS updates matches.
    const sql = `UPDATE tasks SET ${[...assignments, 'version = version + 1', `updated_at = $${n + 1}`].join(', ')} WHERE id = $${n + 2} AND version = $${n + 3} RETURNING id`;
    const values = keys.map((k) => TASK_COLUMNS[k].encode(set[k] as never));
    if ((await query(db, sql, [...values, at, taskId, expectVersion])).length !== 1) {
      const [row] = await query<{ version: number }>(db, S.taskVersion, [taskId]);
      throw new Conflict({ kind: 'task_version', taskId, expected: expectVersion, actual: row?.version ?? null });
    }
  }

  private async writeEffect(db: pg.PoolClient, sid: string, e: NonNullable<CommitInput['effects']>[number], at: number): Promise<void> {
    let [row] = await query<{ status: EffectStatus; intent_json: string }>(db, S.effectGet, [e.id]);
    if (e.create) {
      if (row && row.intent_json !== json(e.create.intent)) throw new Conflict({ kind: 'effect_intent', effectId: e.id });
      if (!row) {
        await query(db, S.effectInsert, [e.id, sid, e.create.runId, e.create.taskId, e.create.kind, json(e.create.intent), e.create.replay, at, at]);
        row = { status: 'intended', intent_json: json(e.create.intent) };
      }
    }
    if (!row) throw new BerthError('effect_not_found', `effect ${e.id} does not exist`, { ids: { effectId: e.id } });
    if (e.expectStatus !== undefined && row.status !== e.expectStatus) {
      throw new Conflict({ kind: 'effect_status', effectId: e.id, expected: e.expectStatus, actual: row.status });
    }
    if (!e.set) return;
    const { status, attempts, receipt, error, owner } = e.set;
    if (owner) await query(db, S.effectOwner, [sid, owner.runId, owner.taskId, e.id]);
    await query(db, S.effectUpdate, [status ?? null, attempts ?? null, receipt === undefined ? null : json(receipt), error === undefined ? null : json(error), at, e.id]);
  }

  private async writeRunTransition(db: pg.PoolClient, t: NonNullable<CommitInput['runTransitions']>[number], actor: string, seq: number, at: number): Promise<void> {
    const [row] = await query<{ state: RunState; transition_count: number; versions_json: string }>(db, S.runGet, [t.runId]);
    if (!row || row.state !== t.from) throw new Conflict({ kind: 'run_state', runId: t.runId, expected: t.from, actual: row?.state ?? null });
    // An owner change (a take-over) records a same-state transition; every other move must be legal.
    if (!(t.ownerChange && t.from === t.to && !isFinalRunState(t.from))) assertRunTransition(t.runId, t.from, t.to);
    if (t.to === 'completed' || isFinalRunState(t.to)) {
      const open = (await query<{ id: string }>(db, t.to === 'completed' ? S.unresolvedEffects : S.uncertainEffects, [t.runId])).map((r) => r.id);
      if (open.length > 0) throw new Conflict({ kind: 'unresolved_effects', runId: t.runId, effectIds: open });
    }
    // The versions in force carry over: a transition names what changed, never erases the
    // environment fingerprint or image digest the run was admitted with.
    const versions = { ...JSON.parse(row.versions_json), ...(t.versions ?? {}) };
    const n = row.transition_count + 1;
    await query(db, S.runUpdate, [t.to, n, json(versions), at, t.runId, t.from]);
    await query(db, S.transitionInsert, [t.runId, n, at, t.actor || actor, t.from, t.to, t.reason, json(versions), seq]);
  }
}
