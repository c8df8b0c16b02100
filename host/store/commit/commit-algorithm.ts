import { BerthError } from '../../errors';
import { assertRunTransition, EffectAttemptLogSchema, isFinalRunState, type EffectStatus, type RunState } from '../../model';
import type { CommitInput, DocumentOpInput, EffectWrite, RunTransitionInput, TaskTransitionInput } from '../commit-input';
import { Conflict, TASK_COLUMNS } from '../commit-columns';
import { json, type Row } from '../sqlite/rows';
import { decodeShaped, RunVersionsSchema } from '../stored-json';
import { nextAttemptLog } from './effect-attempts';
import { assertOwnScope, fenceRefusal, type FenceRow } from './fence';
import { S, taskUpdate } from './statements';
import { all, exec, get, mid, run, type Steps } from './transaction';

type SessionRow = { last_seq: number; entry_seq: number; imported: string | null };

/** What a commit wrote that its caller may keep: the session's new sequence number and the task rows it changed, as it left them. */
export interface Committed {
  seq: number;
  tasks: Row[];
}

/**
 * The commit, once for both stores: every statement of one {@link CommitInput}, in order, as
 * steps a driver runs inside one transaction (SQLite: synchronously inside BEGIN IMMEDIATE;
 * PostgreSQL: awaited inside BEGIN/COMMIT). Returns the new per-session sequence number; throws
 * {@link Conflict} (the driver rolls back and answers it) or a BerthError.
 *
 * @param at the commit's time (the store's clock), written on every row.
 * @param dbNow the database clock the fence's lease is judged by; null on PostgreSQL means the
 *   server's own clock, read inside the fence statement.
 */
export function* commitSteps(c: CommitInput, at: number, dbNow: number | null): Steps<Committed> {
  const sid = c.sessionId;
  const actor = c.actor ?? 'host';
  assertOwnScope(c);
  if (c.createSession) yield* exec(S.sessionInsert, [sid, at, json(c.createSession.meta ?? null)]);
  let session: SessionRow | undefined;
  if (c.fence) {
    const row = yield* get<SessionRow & FenceRow>(S.sessionWithFence, [dbNow, c.fence.scope, sid]);
    const fenceRow = row ?? (yield* get<FenceRow>(S.fence, [dbNow, c.fence.scope]));
    const refused = fenceRefusal(c.fence, fenceRow);
    if (refused) throw new Conflict({ kind: 'fence', scope: c.fence.scope, expected: c.fence.epoch, ...refused });
    session = row;
  } else {
    session = yield* get<SessionRow>(S.sessionGet, [sid]);
  }
  if (!session) throw new BerthError('session_not_found', `session ${sid} does not exist`, { ids: { sessionId: sid } });
  // An imported run is a record, not work: nothing may advance it (resume, reconcile, approve,
  // cancel, a worker that found its tasks), whatever path the commit came from.
  if (session.imported) {
    const runId = session.imported;
    throw new BerthError('run_imported', `run ${runId} was imported from an exported record: it can be shown and checked, never driven`, { ids: { sessionId: sid, runId } });
  }
  const seq = session.last_seq + 1;
  let entrySeq = session.entry_seq;

  for (const conv of c.conversations ?? []) yield* exec(S.conversationInsert, [conv.id, sid, at]);
  for (const sub of c.submissions ?? []) {
    if ((yield* run(S.submissionInsert, [sub.id, sid, sub.requestId, sub.runId, json(sub.input), at])) === 0) {
      const existing = (yield* get<{ id: string; run_id: string }>(S.submissionByRequest, [sub.requestId]))!;
      throw new Conflict({ kind: 'duplicate_request', requestId: sub.requestId, submissionId: existing.id, runId: existing.run_id });
    }
  }
  for (const r of c.runs ?? []) {
    yield* exec(S.runInsert, [r.id, sid, r.submissionId, r.kind, r.rootTaskId, json(r.versions), at, at, r.forkedFromRunId ?? null]);
    yield* exec(S.transitionInsert, [r.id, 1, at, actor, null, 'admitted', r.reason ?? 'submitted', json(r.versions), seq]);
  }
  for (const e of c.entries ?? []) {
    entrySeq += 1;
    yield* exec(S.entryInsert, [sid, entrySeq, e.id, e.conversationId ?? null, e.runId ?? null, e.taskId ?? null, e.kind, json(e.body), seq, at]);
  }
  for (const d of c.documentOps ?? []) yield* documentOp(sid, d, seq, at);
  yield* mid();
  for (const t of c.tasks ?? []) {
    yield* exec(S.taskInsert, [t.id, sid, t.runId, t.parentId, t.kind, t.kindVersion, t.status ?? 'pending', t.phase, json(t.checkpoint ?? null), json(t.input), at, at]);
  }
  for (const t of c.expectTasks ?? []) {
    const row = yield* get<{ version: number }>(S.taskVersion, [t.taskId]);
    if (row?.version !== t.version) throw new Conflict({ kind: 'task_version', taskId: t.taskId, expected: t.version, actual: row?.version ?? null });
  }
  const written = new Map<string, Row>();
  for (const t of c.taskTransitions ?? []) written.set(t.taskId, yield* taskTransition(t, at));
  for (const id of c.cancelTasks ?? []) {
    yield* exec(S.taskCancel, [at, id]);
    // The row as this commit leaves it (taskCancel sets exactly these two columns).
    const row = written.get(id);
    if (row) written.set(id, { ...row, cancel_requested: 1, updated_at: at });
  }
  // Effects before run transitions: a commit that confirms the last effect may also complete the run.
  for (const e of c.effects ?? []) yield* effect(sid, e, at, c.fence?.epoch ?? null, actor);
  for (const n of c.snapshots ?? []) {
    yield* exec(S.snapshotInsert, [n.id, sid, n.runId, n.taskId, n.leaseId, n.imageId, n.workspaceDigest, n.sizeBytes, n.checkpoint, n.parentId, seq, at, n.registryRef ?? null, n.pushedAt ?? null]);
  }
  for (const a of c.acceptance ?? []) yield* exec(S.acceptanceInsert, [a.id, a.runId, a.requestId, a.decision, a.actor, a.reason, json(a.evidence), at, seq]);
  for (const a of c.artifacts ?? []) {
    yield* exec(S.artifactInsert, [a.id, sid, a.runId, a.taskId, a.stepIndex, a.generation, a.step, a.path, a.sizeBytes, a.sha256, a.snapshotId, seq, at, a.mode ?? null]);
  }
  for (const t of c.runTransitions ?? []) {
    // A conditional move (the last open approval of a run decided): evaluated after this
    // commit's task changes, against what other commits have written (under the session lock),
    // so two deciders that each saw the other still waiting cannot both skip it.
    if (t.unlessWaiting && Number((yield* get<{ n: number }>(S.waitingOn, [t.runId, t.unlessWaiting]))!.n) > 0) continue;
    yield* runTransition(t, c.actor ?? t.actor, seq, at);
  }
  // Last, inside the same transaction: the rows above reference the commit's seq by value only,
  // and the commit-order row (numbered later on PostgreSQL: see commitLogInsert) goes in with them.
  yield* exec(S.commitInsert, [sid, seq, at, c.label, actor]);
  yield* exec(S.sessionBump, [seq, entrySeq, sid]);
  yield* exec(S.commitLogInsert, [sid, seq]);
  return { seq, tasks: [...written.values()] };
}

function* documentOp(sid: string, d: DocumentOpInput, seq: number, at: number): Steps<void> {
  if (d.create) {
    if (d.expectVersion !== 0) throw new BerthError('bad_commit', `creating document ${d.documentId} requires expectVersion 0`, { ids: { documentId: d.documentId } });
    if (yield* get(S.docGet, [d.documentId])) throw new Conflict({ kind: 'document_version', documentId: d.documentId, expected: 0, actual: 1 });
    yield* exec(S.docInsert, [d.documentId, sid, d.create.runId, d.create.type, at, at]);
    yield* exec(S.docBaselineInsert, [d.documentId, 0, json(d.create.initial)]);
  }
  const next = d.expectVersion + 1;
  if ((yield* run(S.docBump, [next, at, d.documentId, d.expectVersion])) !== 1) {
    const row = yield* get<{ version: number }>(S.docGet, [d.documentId]);
    throw new Conflict({ kind: 'document_version', documentId: d.documentId, expected: d.expectVersion, actual: row?.version ?? null });
  }
  yield* exec(S.docOpInsert, [d.documentId, next, json(d.op), seq]);
  if (d.baseline !== undefined) {
    yield* exec(S.docBaselineInsert, [d.documentId, next, json(d.baseline)]);
    yield* exec(S.docBaselineMark, [next, d.documentId]);
  }
}

function* taskTransition(t: TaskTransitionInput, at: number): Steps<Row> {
  const keys = (Object.keys(t.set) as Array<keyof typeof t.set>).filter((k) => t.set[k] !== undefined).sort();
  const values = keys.map((k) => TASK_COLUMNS[k].encode(t.set[k] as never));
  const written = yield* get<Row>(taskUpdate(keys), [...values, at, t.taskId, t.expectVersion]);
  if (!written) {
    const row = yield* get<{ version: number }>(S.taskVersion, [t.taskId]);
    throw new Conflict({ kind: 'task_version', taskId: t.taskId, expected: t.expectVersion, actual: row?.version ?? null });
  }
  return written;
}

function* effect(sid: string, e: EffectWrite, at: number, epoch: number | null, actor: string): Steps<void> {
  let row = yield* get<EffectRow>(S.effectGet, [e.id]);
  if (e.create) {
    const intent = json(e.create.intent);
    if (row && row.intent_json !== intent) throw new Conflict({ kind: 'effect_intent', effectId: e.id });
    if (!row) {
      yield* exec(S.effectInsert, [e.id, sid, e.create.runId, e.create.taskId, e.create.kind, intent, e.create.replay, at, at]);
      row = { status: 'intended', intent_json: intent, attempts: 0, run_id: e.create.runId, task_id: e.create.taskId, attempts_json: null };
    }
  }
  if (!row) throw new BerthError('effect_not_found', `effect ${e.id} does not exist`, { ids: { effectId: e.id } });
  if (e.expectStatus !== undefined && row.status !== e.expectStatus) {
    throw new Conflict({ kind: 'effect_status', effectId: e.id, expected: e.expectStatus, actual: row.status });
  }
  if (!e.set) return;
  const { status, attempts, receipt, error, owner } = e.set;
  if (owner) {
    // The run that attempted it before keeps it in its record (its failure came from this effect).
    if (row.run_id !== null && row.run_id !== owner.runId) yield* exec(S.effectFormerRun, [e.id, row.run_id]);
    yield* exec(S.effectOwner, [sid, owner.runId, owner.taskId, e.id]);
  }
  const before = { status: row.status, attempts: Number(row.attempts), runId: row.run_id, taskId: row.task_id, log: decodeShaped(row.attempts_json ?? '[]', EffectAttemptLogSchema, { table: 'effects', rowId: e.id, field: 'attempts_json' }) };
  const log = nextAttemptLog(before, e, at, epoch, actor);
  yield* exec(S.effectUpdate, [status ?? null, attempts ?? null, receipt === undefined ? null : json(receipt), error === undefined ? null : json(error), log ? json(log) : null, at, e.id]);
}

type EffectRow = { status: EffectStatus; intent_json: string; attempts: number; run_id: string | null; task_id: string | null; attempts_json: string | null };

function* runTransition(t: RunTransitionInput, actor: string, seq: number, at: number): Steps<void> {
  const row = yield* get<{ state: RunState; transition_count: number; versions_json: string }>(S.runGet, [t.runId]);
  if (!row || row.state !== t.from) throw new Conflict({ kind: 'run_state', runId: t.runId, expected: t.from, actual: row?.state ?? null });
  // An owner change (a take-over) records a same-state transition; every other move must be legal.
  if (!(t.ownerChange && t.from === t.to && !isFinalRunState(t.from))) assertRunTransition(t.runId, t.from, t.to);
  // Checked here, inside the transaction, so an effect marked `executing` by a sibling task
  // between a decider's read and its commit cannot slip under a final state. `completed` also
  // needs every intended effect done; other final states only need none possibly in progress.
  if (t.to === 'completed' || isFinalRunState(t.to)) {
    const left = new Set(t.to === 'failed' ? (t.leaveUncertain ?? []) : []);
    const open = (yield* all<{ id: string }>(t.to === 'completed' ? S.unresolvedEffects : S.uncertainEffects, [t.runId])).map((r) => r.id).filter((id) => !left.has(id));
    if (open.length > 0) throw new Conflict({ kind: 'unresolved_effects', runId: t.runId, effectIds: open });
  }
  // The versions in force carry over: a transition names what changed (the kernel names only
  // itself), never erases the environment fingerprint or image digest the run was admitted with.
  const stored = decodeShaped(row.versions_json, RunVersionsSchema, { table: 'runs', rowId: t.runId, field: 'versions_json' });
  const versions = json({ ...stored, ...(t.versions ?? {}) });
  const n = row.transition_count + 1;
  yield* exec(S.runUpdate, [t.to, n, versions, at, t.runId, t.from]);
  yield* exec(S.transitionInsert, [t.runId, n, at, t.actor || actor, t.from, t.to, t.reason, versions, seq]);
}
