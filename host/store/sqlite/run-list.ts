import type Database from 'better-sqlite3';
import { FIRST_STATES, likePattern, nameFromMeta, tagsFromMeta, type RunListReads } from '../run-list';
import { toRun, type Row } from './rows';

/** The runs page's reads (see ../run-list.ts): one indexed, ordered, limited query and a count. */
export function sqliteRunList(db: Database.Database): RunListReads {
  const byState = db.prepare('SELECT state, COUNT(*) AS n FROM runs GROUP BY state');
  return {
    async countRunsByState() {
      return Object.fromEntries((byState.all() as Array<{ state: string; n: number }>).map((r) => [r.state, r.n]));
    },
    async listRunPage(q) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (q.states?.length) (where.push(`r.state IN (${q.states.map(() => '?').join(',')})`), args.push(...q.states));
      if (q.sessionIds) (where.push(`r.session_id IN (${q.sessionIds.map(() => '?').join(',') || "''"})`), args.push(...q.sessionIds));
      if (q.createdFrom !== undefined) (where.push('r.created_at >= ?'), args.push(q.createdFrom));
      if (q.createdTo !== undefined) (where.push('r.created_at < ?'), args.push(q.createdTo));
      if (q.search) {
        const p = likePattern(q.search);
        where.push("(r.id LIKE ? ESCAPE '\\' OR json_extract(s.meta_json, '$.name') LIKE ? ESCAPE '\\' OR json_extract(s.meta_json, '$.task') LIKE ? ESCAPE '\\')");
        args.push(p, p, p);
      }
      for (const tag of q.tags ?? []) (where.push("EXISTS (SELECT 1 FROM json_each(s.meta_json, '$.tags') t WHERE t.value = ?)"), args.push(tag));
      const from = (more: string[] = []) => `FROM runs r JOIN sessions s ON s.id = r.session_id${where.length + more.length ? ` WHERE ${[...where, ...more].join(' AND ')}` : ''}`;
      const first = FIRST_STATES.map((s) => `'${s}'`).join(',');
      let rows: Row[];
      if (q.order === 'created') {
        const cursor = q.after ? ['(r.created_at > ? OR (r.created_at = ? AND r.id > ?))'] : [];
        const cursorArgs = q.after ? [q.after.createdAt, q.after.createdAt, q.after.id] : [];
        rows = db.prepare(`SELECT r.*, s.meta_json AS session_meta ${from(cursor)} ORDER BY r.created_at, r.id LIMIT ? OFFSET ?`).all(...args, ...cursorArgs, Math.floor(q.limit), Math.floor(q.offset ?? 0)) as Row[];
      } else {
        rows = db.prepare(`SELECT r.*, s.meta_json AS session_meta ${from()} ORDER BY CASE WHEN r.state IN (${first}) THEN 0 ELSE 1 END, r.created_at DESC, r.id DESC LIMIT ? OFFSET ?`).all(...args, Math.floor(q.limit), Math.floor(q.offset ?? 0)) as Row[];
      }
      const total = q.count === false ? -1 : (db.prepare(`SELECT COUNT(*) AS n ${from()}`).get(...args) as { n: number }).n;
      return { runs: rows.map((r) => ({ ...toRun(r), ...listed(parseMeta(r.session_meta)) })), total };
    },
  };
}

/** What a listed run has beyond the run: its name and tags, from the session's meta. */
export const listed = (meta: unknown) => ({ name: nameFromMeta(meta), tags: tagsFromMeta(meta) });

export function parseMeta(v: unknown): unknown {
  if (typeof v !== 'string') return null;
  try {
    return JSON.parse(v);
  } catch {
    return null;
  }
}
