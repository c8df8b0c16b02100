import type Database from 'better-sqlite3';
import type { CommitRecord, StoredDocument } from '../../model';
import type { EntryFilter, Page, Store, TaskFilter } from '../store';
import { sqliteImportedReads } from './imported';
import { toDocument, toEffect, toEntry, toRun, toRunTransition, toSession, toSubmission, toTask, type Row } from './rows';
import { preparedFor } from './statement-cache';
import { TASK_READ_COLUMNS, TaskInputs } from '../task-inputs';

type Reads = Omit<
  Store,
  'location' | 'commit' | 'close' | 'listArtifacts' | keyof import('../../model').LeaseRecords | keyof ReturnType<typeof import('./snapshots').sqliteSnapshots> | keyof ReturnType<typeof import('./snapshot-deltas').sqliteSnapshotDeltas> | keyof ReturnType<typeof import('./snapshot-push').sqliteSnapshotPush> | keyof import('../../model').EgressAuditRecords | keyof import('../read-ports').AcceptanceReads | keyof import('../read-ports').CostRecords | keyof import('../commit-log').CommitLogRecords | keyof import('../imported').ImportedRunRecords | keyof import('../ownership').OwnershipRecords | keyof import('../read-ports').ForkReads | keyof import('../registry-deletes').RegistryDeleteRecords | keyof import('../output').OutputRecords | keyof import('../run-list').RunListReads
>;

/**
 * `SELECT * FROM table WHERE col = ? AND col2 IN (...)`: undefined filter values are ignored,
 * arrays become IN lists. Column names come from this file only, never from callers.
 */
function selectWhere(db: Database.Database, table: string, conds: Record<string, unknown>, order: string, extra: string[] = [], columns = '*'): Row[] {
  const clauses: string[] = [...extra];
  const args: unknown[] = [];
  for (const [column, value] of Object.entries(conds)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      if (value.length === 0) continue;
      clauses.push(`${column} IN (${value.map(() => '?').join(',')})`);
      args.push(...value);
    } else {
      clauses.push(`${column} = ?`);
      args.push(value);
    }
  }
  const sql = `SELECT ${columns} FROM ${table} ${clauses.length ? `WHERE ${clauses.join(' AND ')}` : ''} ORDER BY ${order}`;
  return preparedFor(db, sql).all(...args) as Row[];
}

/**
 * `status <> 'terminal'` when the statuses asked for exclude it: the term the partial index
 * `tasks_active` is declared with, so the planner reads the active tasks by index (an `IN` list
 * alone does not prove the index's condition, and every poll scanned every task of the store).
 */
export function activeOnly(filter: { statuses?: string[] }): string[] {
  return filter.statuses?.length && !filter.statuses.includes('terminal') ? ["status <> 'terminal'"] : [];
}

/** ` LIMIT n OFFSET k` for a page (integers only: nothing from the caller reaches the SQL text). */
export const pageSql = (page: Page | undefined): string => (page ? ` LIMIT ${Math.max(0, Math.floor(page.limit))} OFFSET ${Math.max(0, Math.floor(page.offset))}` : '');

/** Two row lists each ordered by (created_at, id), as one; the common case (one empty) keeps the SQL order as it is. */
export function mergeByCreation(a: Row[], b: Row[]): Row[] {
  if (b.length === 0) return a;
  if (a.length === 0) return b;
  const key = (r: Row) => [r.created_at as number, r.id as string] as const;
  return [...a, ...b].sort((x, y) => {
    const [ax, ix] = key(x);
    const [ay, iy] = key(y);
    return ax - ay || (ix < iy ? -1 : ix > iy ? 1 : 0);
  });
}

/** `id, input_json` of these tasks (the inputs a read left out: task-inputs.ts). */
export function taskInputsById(db: Database.Database, ids: string[]): Row[] {
  return preparedFor(db, `SELECT id, input_json FROM tasks WHERE id IN (${ids.map(() => '?').join(',')})`).all(...ids) as Row[];
}

/** Every read of the SQLite store. Statements are prepared once; filters with variable shape are prepared per call. */
export function sqliteReads(db: Database.Database, inputs = new TaskInputs()): Reads {
  const p = (sql: string) => db.prepare(sql);
  const taskRows = (rows: Row[]) => inputs.fill(rows, (ids) => taskInputsById(db, ids));
  const s = {
    session: p('SELECT * FROM sessions WHERE id = ?'),
    commits: p('SELECT * FROM commits WHERE session_id = ? AND seq > ? ORDER BY seq'),
    commitsPage: p('SELECT * FROM commits WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?'),
    submission: p('SELECT * FROM submissions WHERE id = ?'),
    submissionByRequest: p('SELECT * FROM submissions WHERE request_id = ?'),
    run: p('SELECT * FROM runs WHERE id = ?'),
    transitions: p('SELECT * FROM run_transitions WHERE run_id = ? ORDER BY n'),
    task: p(`SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id = ?`),
    nextWake: p("SELECT MIN(wake_at) AS t FROM tasks WHERE status = 'sleeping'"),
    doc: p('SELECT * FROM documents WHERE id = ?'),
    docBaseline: p('SELECT state_json FROM document_baselines WHERE document_id = ? AND version = ?'),
    docOps: p('SELECT version, op_json FROM document_ops WHERE document_id = ? AND version > ? ORDER BY version'),
    effect: p('SELECT * FROM effects WHERE id = ?'),
    effectsMovedFrom: p('SELECT e.* FROM effect_runs r JOIN effects e ON e.id = r.effect_id WHERE r.run_id = ? AND e.run_id IS NOT ?'),
  };
  const imported = sqliteImportedReads(db);
  const document = (r: Row): StoredDocument => {
    const baselineVersion = r.baseline_version as number;
    const base = s.docBaseline.get(r.id, baselineVersion) as { state_json: unknown } | undefined;
    return toDocument(r, base?.state_json, s.docOps.all(r.id, baselineVersion) as Row[]);
  };

  return {
    async getSession(id) {
      const r = s.session.get(id) as Row | undefined;
      return r ? toSession(r) : undefined;
    },
    async listCommits(sessionId, afterSeq = 0, limit) {
      return ((limit === undefined ? s.commits.all(sessionId, afterSeq) : s.commitsPage.all(sessionId, afterSeq, Math.max(0, Math.floor(limit)))) as Row[]).map(
        (r): CommitRecord => ({
          sessionId: r.session_id as string,
          seq: r.seq as number,
          at: r.at as number,
          label: r.label as string,
          actor: r.actor as string,
        }),
      );
    },
    async getSubmission(id) {
      const r = (s.submission.get(id) as Row | undefined) ?? imported.submission(id);
      return r ? toSubmission(r) : undefined;
    },
    async findSubmission(requestId) {
      const r = s.submissionByRequest.get(requestId) as Row | undefined;
      return r ? toSubmission(r) : undefined;
    },
    async getRun(id) {
      const r = s.run.get(id) as Row | undefined;
      return r ? toRun(r) : undefined;
    },
    async listRuns(filter = {}) {
      const conds = { session_id: filter.sessionId, state: filter.states, kind: filter.kind };
      if (filter.newest !== undefined) return selectWhere(db, 'runs', conds, `created_at DESC, id DESC LIMIT ${Math.max(0, Math.floor(filter.newest))}`).reverse().map(toRun);
      return selectWhere(db, 'runs', conds, 'created_at, id').map(toRun);
    },
    async listRunTransitions(runId) {
      return (s.transitions.all(runId) as Row[]).map(toRunTransition);
    },
    async getTask(id) {
      const r = s.task.get(id) as Row | undefined;
      return r ? toTask(taskRows([r])[0]!) : undefined;
    },
    async listTasks(filter: TaskFilter = {}) {
      if (filter.sessionIds?.length === 0) return [];
      const sessions = filter.sessionId !== undefined ? (filter.sessionIds && !filter.sessionIds.includes(filter.sessionId) ? [] : filter.sessionId) : filter.sessionIds;
      if (Array.isArray(sessions) && sessions.length === 0) return [];
      const conds = { run_id: filter.runId, parent_id: filter.parentId, session_id: sessions, status: filter.statuses };
      // Insertion order (SQLite's rowid; tasks are never deleted, so it only grows, and commits are
      // serialised), not created_at: the wall clock can step backwards between two spawns.
      if (filter.newest !== undefined) return taskRows(selectWhere(db, 'tasks', conds, `rowid DESC LIMIT ${Math.max(0, Math.floor(filter.newest))}`, activeOnly(filter), TASK_READ_COLUMNS)).reverse().map(toTask);
      return taskRows(selectWhere(db, 'tasks', conds, `rowid${pageSql(filter.page)}`, activeOnly(filter), TASK_READ_COLUMNS)).map(toTask);
    },
    async nextWakeAt() {
      return ((s.nextWake.get() as { t: number | null }).t ?? null) as number | null;
    },
    async listEntries(sessionId, filter: EntryFilter = {}) {
      const clauses = ['session_id = ?', 'seq > ?'];
      const args: unknown[] = [sessionId, filter.afterSeq ?? 0];
      if (filter.runId) (clauses.push('run_id = ?'), args.push(filter.runId));
      if (filter.conversationId) (clauses.push('conversation_id = ?'), args.push(filter.conversationId));
      if (filter.kinds) (clauses.push(`kind IN (${filter.kinds.map(() => '?').join(', ') || 'NULL'})`), args.push(...filter.kinds));
      const limit = filter.limit ? ` LIMIT ${Math.floor(filter.limit)}` : '';
      return (p(`SELECT * FROM entries WHERE ${clauses.join(' AND ')} ORDER BY seq${limit}`).all(...args) as Row[]).map(toEntry);
    },
    async getDocument(id) {
      const r = s.doc.get(id) as Row | undefined;
      return r ? document(r) : undefined;
    },
    async listDocuments(filter) {
      return selectWhere(db, 'documents', { run_id: filter.runId, session_id: filter.sessionId }, 'created_at, id').map(document);
    },
    // By key: live effects only (an imported run's are another store's facts, never this one's).
    async getEffect(id) {
      const r = s.effect.get(id) as Row | undefined;
      return r ? toEffect(r) : undefined;
    },
    async listEffects(filter) {
      const n = filter.newest === undefined ? undefined : Math.max(0, Math.floor(filter.newest));
      const conds = { run_id: filter.runId, task_id: filter.taskId };
      if (filter.page && n === undefined) {
        // Only the run's own live rows can be paged in SQL; effects it lost to a later run and an
        // imported run's (both rare) are merged by creation time, so such a list is paged whole.
        const moved = filter.earlier && filter.runId ? (s.effectsMovedFrom.all(filter.runId, filter.runId) as Row[]) : [];
        const other = mergeByCreation(moved, imported.effects(filter));
        if (other.length === 0) return selectWhere(db, 'effects', conds, `created_at, id${pageSql(filter.page)}`).map(toEffect);
        const { offset, limit } = filter.page;
        return mergeByCreation(selectWhere(db, 'effects', conds, 'created_at, id'), other).slice(offset, offset + limit).map(toEffect);
      }
      let live = n === undefined ? selectWhere(db, 'effects', conds, 'created_at, id') : selectWhere(db, 'effects', { run_id: filter.runId, task_id: filter.taskId }, `created_at DESC, id DESC LIMIT ${n}`).reverse();
      if (filter.earlier && filter.runId) {
        const moved = s.effectsMovedFrom.all(filter.runId, filter.runId) as Row[];
        if (moved.length) live = mergeByCreation(live, moved);
      }
      const all = mergeByCreation(live, imported.effects(filter));
      return (n === undefined ? all : n > 0 ? all.slice(-n) : []).map(toEffect);
    },
  };
}
