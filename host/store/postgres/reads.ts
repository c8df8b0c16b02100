import type pg from 'pg';
import type { CommitRecord, StoredDocument } from '../../model';
import type { EntryFilter, Store, TaskFilter } from '../store';
import { postgresImportedReads } from './imported';
import { activeOnly, mergeByCreation, pageSql } from '../sqlite/reads';
import { query, type Queryable, type Row } from './open';
import { toDocument, toEffect, toEntry, toRun, toRunTransition, toSession, toSubmission, toTask } from './rows';
import { TASK_READ_COLUMNS, TaskInputs } from '../task-inputs';

type Reads = Pick<
  Store,
  | 'getSession' | 'listCommits' | 'getSubmission' | 'findSubmission' | 'getRun' | 'listRuns' | 'listRunTransitions' | 'getTask'
  | 'listTasks' | 'nextWakeAt' | 'listEntries' | 'getDocument' | 'listDocuments' | 'getEffect' | 'listEffects'
>;

/** `SELECT * FROM table WHERE …`: undefined filter values are ignored, arrays become `= ANY($n)`. Column names come from this file only. */
async function selectWhere(pool: pg.Pool, table: string, conds: Record<string, unknown>, order: string, extra: string[] = [], columns = '*'): Promise<Row[]> {
  const clauses: string[] = [...extra];
  const args: unknown[] = [];
  for (const [column, value] of Object.entries(conds)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      if (value.length === 0) continue;
      args.push(value);
      clauses.push(`${column} = ANY($${args.length})`);
    } else {
      args.push(value);
      clauses.push(`${column} = $${args.length}`);
    }
  }
  return query(pool, `SELECT ${columns} FROM ${table} ${clauses.length ? `WHERE ${clauses.join(' AND ')}` : ''} ORDER BY ${order}`, args);
}

/** `id, input_json` of these tasks (the inputs a read left out: task-inputs.ts). */
export function taskInputsById(pool: Queryable, ids: string[]): Promise<Row[]> {
  return query(pool, 'SELECT id, input_json FROM tasks WHERE id = ANY($1)', [ids]);
}

/** Every read of the PostgreSQL store (see the SQLite twin), each a named prepared statement. */
export function postgresReads(pool: pg.Pool, inputs = new TaskInputs()): Reads {
  const taskRows = (rows: Row[]) => inputs.fillAsync(rows, (ids) => taskInputsById(pool, ids));
  const one = async (sql: string, args: unknown[]) => (await query(pool, sql, args))[0];
  const imported = postgresImportedReads(pool);
  const document = async (r: Row): Promise<StoredDocument> => {
    const baselineVersion = r.baseline_version as number;
    const base = await one('SELECT state_json FROM document_baselines WHERE document_id = $1 AND version = $2', [r.id, baselineVersion]);
    const ops = await query(pool, 'SELECT version, op_json FROM document_ops WHERE document_id = $1 AND version > $2 ORDER BY version', [r.id, baselineVersion]);
    return toDocument(r, base?.state_json, ops);
  };

  return {
    async getSession(id) {
      const r = await one('SELECT * FROM sessions WHERE id = $1', [id]);
      return r ? toSession(r) : undefined;
    },
    async listCommits(sessionId, afterSeq = 0, limit) {
      const rows = limit === undefined
        ? await query(pool, 'SELECT * FROM commits WHERE session_id = $1 AND seq > $2 ORDER BY seq', [sessionId, afterSeq])
        : await query(pool, 'SELECT * FROM commits WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [sessionId, afterSeq, Math.max(0, Math.floor(limit))]);
      return rows.map(
        (r): CommitRecord => ({ sessionId: r.session_id as string, seq: r.seq as number, at: r.at as number, label: r.label as string, actor: r.actor as string }),
      );
    },
    async getSubmission(id) {
      const r = (await one('SELECT * FROM submissions WHERE id = $1', [id])) ?? (await imported.submission(id));
      return r ? toSubmission(r) : undefined;
    },
    async findSubmission(requestId) {
      const r = await one('SELECT * FROM submissions WHERE request_id = $1', [requestId]);
      return r ? toSubmission(r) : undefined;
    },
    async getRun(id) {
      const r = await one('SELECT * FROM runs WHERE id = $1', [id]);
      return r ? toRun(r) : undefined;
    },
    async listRuns(filter = {}) {
      const conds = { session_id: filter.sessionId, state: filter.states, kind: filter.kind };
      if (filter.newest !== undefined) return (await selectWhere(pool, 'runs', conds, `created_at DESC, id DESC LIMIT ${Math.max(0, Math.floor(filter.newest))}`)).reverse().map(toRun);
      return (await selectWhere(pool, 'runs', conds, 'created_at, id')).map(toRun);
    },
    async listRunTransitions(runId) {
      return (await query(pool, 'SELECT * FROM run_transitions WHERE run_id = $1 ORDER BY n', [runId])).map(toRunTransition);
    },
    async getTask(id) {
      const r = await one(`SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id = $1`, [id]);
      return r ? toTask((await taskRows([r]))[0]!) : undefined;
    },
    async listTasks(filter: TaskFilter = {}) {
      if (filter.sessionIds?.length === 0) return [];
      const sessions = filter.sessionId !== undefined ? (filter.sessionIds && !filter.sessionIds.includes(filter.sessionId) ? [] : filter.sessionId) : filter.sessionIds;
      if (Array.isArray(sessions) && sessions.length === 0) return [];
      const conds = { run_id: filter.runId, parent_id: filter.parentId, session_id: sessions, status: filter.statuses };
      // Insertion order (the identity column; commits of one session are serialised by its row
      // lock), not created_at: the wall clock can step backwards between two spawns.
      if (filter.newest !== undefined) return (await taskRows(await selectWhere(pool, 'tasks', conds, `ord DESC LIMIT ${Math.max(0, Math.floor(filter.newest))}`, activeOnly(filter), TASK_READ_COLUMNS))).reverse().map(toTask);
      return (await taskRows(await selectWhere(pool, 'tasks', conds, `ord${pageSql(filter.page)}`, activeOnly(filter), TASK_READ_COLUMNS))).map(toTask);
    },
    async nextWakeAt() {
      const r = await one("SELECT MIN(wake_at) AS t FROM tasks WHERE status = 'sleeping'", []);
      return (r?.t as number | null) ?? null;
    },
    async listEntries(sessionId, filter: EntryFilter = {}) {
      const clauses = ['session_id = $1', 'seq > $2'];
      const args: unknown[] = [sessionId, filter.afterSeq ?? 0];
      if (filter.runId) (args.push(filter.runId), clauses.push(`run_id = $${args.length}`));
      if (filter.conversationId) (args.push(filter.conversationId), clauses.push(`conversation_id = $${args.length}`));
      if (filter.kinds) (args.push(filter.kinds), clauses.push(`kind = ANY($${args.length}::text[])`));
      const limit = filter.limit ? ` LIMIT ${Math.floor(filter.limit)}` : '';
      return (await query(pool, `SELECT * FROM entries WHERE ${clauses.join(' AND ')} ORDER BY seq${limit}`, args)).map(toEntry);
    },
    async getDocument(id) {
      const r = await one('SELECT * FROM documents WHERE id = $1', [id]);
      return r ? document(r) : undefined;
    },
    async listDocuments(filter) {
      const rows = await selectWhere(pool, 'documents', { run_id: filter.runId, session_id: filter.sessionId }, 'created_at, id');
      return Promise.all(rows.map(document));
    },
    // By key: live effects only (an imported run's are another store's facts, never this one's).
    async getEffect(id) {
      const r = await one('SELECT * FROM effects WHERE id = $1', [id]);
      return r ? toEffect(r) : undefined;
    },
    async listEffects(filter) {
      const n = filter.newest === undefined ? undefined : Math.max(0, Math.floor(filter.newest));
      const conds = { run_id: filter.runId, task_id: filter.taskId };
      if (filter.page && n === undefined) {
        // As in the SQLite twin: only the run's own live rows are paged in SQL.
        const moved = filter.earlier && filter.runId ? await query(pool, 'SELECT e.* FROM effect_runs r JOIN effects e ON e.id = r.effect_id WHERE r.run_id = $1 AND e.run_id IS DISTINCT FROM $1', [filter.runId]) : [];
        const other = mergeByCreation(moved, await imported.effects(filter));
        if (other.length === 0) return (await selectWhere(pool, 'effects', conds, `created_at, id${pageSql(filter.page)}`)).map(toEffect);
        const { offset, limit } = filter.page;
        return mergeByCreation(await selectWhere(pool, 'effects', conds, 'created_at, id'), other).slice(offset, offset + limit).map(toEffect);
      }
      let live = n === undefined ? await selectWhere(pool, 'effects', conds, 'created_at, id') : (await selectWhere(pool, 'effects', { run_id: filter.runId, task_id: filter.taskId }, `created_at DESC, id DESC LIMIT ${n}`)).reverse();
      if (filter.earlier && filter.runId) {
        const moved = await query(pool, 'SELECT e.* FROM effect_runs r JOIN effects e ON e.id = r.effect_id WHERE r.run_id = $1 AND e.run_id IS DISTINCT FROM $1', [filter.runId]);
        if (moved.length) live = mergeByCreation(live, moved);
      }
      const all = mergeByCreation(live, await imported.effects(filter));
      return (n === undefined ? all : n > 0 ? all.slice(-n) : []).map(toEffect);
    },
  };
}
